"""`taskyard pool list|show|create|update|delete|workers|errors` against a real server: local and
static pools made from flags and config files, static workers and pool errors made with
TaskCluster's client, and the refusals on one line."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import taskcluster

from tests.cli.helpers import Run, environment, run
from tests.e2e.conftest import Server


def unique(name: str) -> str:
    """A pool id of its own: a provisionerId per test, `name` its workerType."""
    return f"cli-{uuid.uuid4().hex[:8]}/{name}"


def worker_manager(server: Server) -> taskcluster.WorkerManager:
    return taskcluster.WorkerManager(server.options())


def row(listing: str, pool_id: str) -> list[str]:
    """The columns of `pool_id`'s line in a table (split on runs of two spaces or more)."""
    for line in listing.splitlines():
        if line.startswith(pool_id + " "):
            return [cell.strip() for cell in line.split("  ") if cell.strip()]
    raise AssertionError(f"{pool_id} is not listed:\n{listing}")


def test_a_local_pool_from_flags_then_changed_by_flags_and_a_file(cli: Run, tmp_path: Path) -> None:
    pool = unique("builds")
    made = cli(
        "pool", "create", pool, "--provider", "local", "--max-capacity", "3",
        "--idle-timeout", "60", "--description", "the CLI's test", "--owner", "cli@example.com",
    )  # fmt: skip
    assert f"Created worker pool {pool} (provider local)" in made.stdout
    # min 0 and nothing pending: no worker is started, the capacity is 0 of 0-3
    assert row(cli("pool", "list").stdout, pool) == [pool, "local", "0/0-3", "0", "none"]
    shown = json.loads(cli("pool", "show", pool, "-o", "json").stdout)
    assert shown["config"] == {"maxCapacity": 3, "idleTimeoutSeconds": 60}
    assert shown["owner"] == "cli@example.com" and shown["description"] == "the CLI's test"
    assert shown["pendingTasks"] == 0
    text = cli("pool", "show", pool).stdout
    assert "capacity:" in text and "0/0-3" in text and '"idleTimeoutSeconds": 60' in text

    cli("pool", "update", pool, "--max-capacity", "5", "--capacity-per-worker", "2")
    shown = json.loads(cli("pool", "show", pool, "-o", "json").stdout)
    assert shown["config"] == {"maxCapacity": 5, "idleTimeoutSeconds": 60, "capacityPerWorker": 2}
    assert shown["owner"] == "cli@example.com"  # kept: not given

    config = tmp_path / "pool.yaml"
    config.write_text("maxCapacity: 2\nworkerConfig:\n  protocol: poll\n")
    cli("pool", "update", pool, "--config", str(config), "--min-capacity", "0", "--no-email-on-error")
    shown = json.loads(cli("pool", "show", pool, "-o", "json").stdout)
    assert shown["config"] == {"maxCapacity": 2, "minCapacity": 0, "workerConfig": {"protocol": "poll"}}
    assert shown["description"] == "the CLI's test" and shown["emailOnError"] is False

    # The server's 400 on one line, naming the field; nothing changed.
    refused = cli("pool", "update", pool, "--min-capacity", "4", status=1)
    assert refused.stderr.strip() == "taskyard: config.minCapacity (4) must be at most config.maxCapacity (2)"
    assert json.loads(cli("pool", "show", pool, "-o", "json").stdout)["config"]["maxCapacity"] == 2
    missing = cli("pool", "create", unique("nomax"), "--provider", "local", status=1)
    assert missing.stderr.strip() == "taskyard: config.maxCapacity is required"

    done = cli("pool", "delete", pool)
    assert f"Deleted worker pool {pool}" in done.stdout
    assert row(cli("pool", "list").stdout, pool)[1] == "(deleted)"
    again = cli("pool", "update", pool, "--description", "back?", status=1)
    assert "is deleted" in again.stderr and "--provider" in again.stderr


def test_a_static_pool_its_workers_and_errors(server: Server, cli: Run) -> None:
    pool = unique("machines")
    cli("pool", "create", pool, "--provider", "static")
    wm = worker_manager(server)
    expires = taskcluster.fromNowJSON("1 day")
    for worker_id in ("m0", "m1", "m2"):
        body = {"expires": expires, "capacity": 2, "providerInfo": {"staticSecret": "s" * 44}}
        wm.createWorker(pool, "rack-1", worker_id, body)
    wm.removeWorker(pool, "rack-1", "m2")
    report = {"workerGroup": "rack-1", "workerId": "m0", "kind": "boot-failure", "title": "disk full",
              "description": "no space left on /\nthe rest", "extra": {}}  # fmt: skip
    error = wm.reportWorkerError(pool, report)

    listing = cli("pool", "list").stdout
    assert row(listing, pool) == [pool, "static", "4", "0", "2 running, 1 stopped"]
    workers = cli("pool", "workers", pool).stdout.splitlines()
    assert workers[0].split() == ["WORKER", "STATE", "CAPACITY", "CREATED"]
    assert [line.split()[:3] for line in workers[1:]] == [
        ["rack-1/m0", "running", "2"],
        ["rack-1/m1", "running", "2"],
        ["rack-1/m2", "stopped", "2"],
    ]
    stopped = cli("pool", "workers", pool, "--state", "stopped").stdout.splitlines()
    assert [line.split()[0] for line in stopped[1:]] == ["rack-1/m2"]
    assert cli("pool", "workers", pool, "--state", "requested").stdout.strip() == "no requested workers"
    as_json = json.loads(cli("pool", "workers", pool, "-o", "json").stdout)
    assert {w["workerId"] for w in as_json} == {"m0", "m1", "m2"}

    errors = cli("pool", "errors", pool).stdout.splitlines()
    assert errors[0].split() == ["REPORTED", "KIND", "TITLE"]
    assert errors[1].split() == [error["reported"], "boot-failure", "disk", "full"]
    wide = cli("pool", "errors", pool, "-o", "wide").stdout
    assert error["errorId"] in wide and "no space left on /" in wide and "the rest" not in wide
    assert json.loads(cli("pool", "errors", pool, "--json").stdout)[0]["errorId"] == error["errorId"]


def test_refusals_print_one_line(server: Server, cli: Run) -> None:
    pool = unique("guarded")
    cli("pool", "create", pool, "--provider", "static")
    auth = taskcluster.Auth(server.options())
    client_id = f"cli-pools-{uuid.uuid4().hex[:8]}"
    # May list the pools, but neither count their queues' tasks nor change them.
    made = auth.createClient(
        client_id,
        {"expires": taskcluster.fromNowJSON("1 hour"), "description": "cli", "scopes": [
            "worker-manager:list-worker-pools", f"worker-manager:get-worker-pool:{pool}"]},
    )  # fmt: skip
    env = environment(server, client_id, made["accessToken"])
    listed = run(env, "pool", "list")
    assert listed.returncode == 0, listed.stderr
    assert row(listed.stdout, pool) == [pool, "static", "0", "-", "none"]
    assert json.loads(run(env, "pool", "list", "-o", "json").stdout)
    shown = run(env, "pool", "show", pool)
    needs = f"queue:pending-count:{pool} and queue:claimed-count:{pool}"
    assert f"pending tasks:  - (needs {needs})" in shown.stdout
    refused = run(env, "pool", "delete", pool)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"worker-manager:manage-worker-pool:{pool}" in lines[0], refused.stderr

    missing = cli("pool", "show", unique("none"), status=1)
    assert len(missing.stderr.strip().splitlines()) == 1 and "does not exist" in missing.stderr
    # A pool id that is no task queue id is refused before any request, as bad usage.
    bad = cli("pool", "workers", "no-slash", status=2)
    assert "'no-slash' is not a worker pool id" in bad.stderr
    nothing = cli("pool", "update", pool, status=2)
    assert "nothing to change" in nothing.stderr
