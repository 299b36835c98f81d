"""`taskyard client|role|scopes` against a real server, run as the installed `taskyard` command.

What the CLI makes is checked with TaskCluster's own client: a created client's printed token signs
queue calls held to its scopes; a reset token replaces the old one; a deleted client is locked out.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
import taskcluster

from taskyard.cli import admin, main
from taskyard.model import dates
from tests.cli.helpers import Run, environment, run, unique
from tests.e2e.conftest import ROOT_CLIENT_ID, Server, free_port
from tests.e2e.helpers import create, now, parse, refused, task_queue_id


def token_in(output: str) -> str:
    """The access token printed under its label, the only place it appears."""
    lines = output.splitlines()
    token = lines[lines.index(admin.TOKEN_LABEL) + 1].strip()
    assert len(token) == 44 and output.count(token) == 1, output
    return token


def as_client(server: Server, client_id: str, token: str) -> taskcluster.Queue:
    return server.client({"clientId": client_id, "accessToken": token})


# ---------------------------------------------------------------------------------------------------
# Clients


def test_a_created_client_works_with_its_printed_token(server: Server, cli: Run, tq: str) -> None:
    task_id = create(server.client(), tq)
    client_id = unique("reader")
    created = cli(
        "client", "create", client_id, "--scope", "queue:get-task:*", "--description", "reads tasks",
        "--expires-in", "2h",
    )  # fmt: skip
    token = token_in(created.stdout)
    assert f"Created client {client_id}." in created.stdout and "reads tasks" in created.stdout
    expires = parse(server.auth_client().client(client_id)["expires"])
    assert timedelta(minutes=119) < expires - now() <= timedelta(hours=2)

    reader = as_client(server, client_id, token)
    assert reader.task(task_id)["taskQueueId"] == tq
    with refused(403, "InsufficientScopes"):
        reader.status(task_id)

    listed = cli("client", "list", "--prefix", client_id.split("/")[0])
    assert client_id in listed.stdout and "active" in listed.stdout and token not in listed.stdout
    as_json = json.loads(cli("client", "list", "--prefix", client_id, "--json").stdout)
    assert [c["clientId"] for c in as_json] == [client_id]
    assert as_json[0]["scopes"] == ["queue:get-task:*"] and "accessToken" not in as_json[0]


def test_reset_replaces_the_token_and_delete_locks_the_client_out(server: Server, cli: Run, tq: str) -> None:
    task_id = create(server.client(), tq)
    client_id = unique("rotated")
    created = json.loads(
        cli("client", "create", client_id, "--scope", "queue:get-task:*", "--json",
            "--expires", dates.to_iso(dates.now_ms() + dates.DAY)).stdout
    )  # fmt: skip
    old = created["accessToken"]
    assert as_client(server, client_id, old).task(task_id)

    reset = cli("client", "reset", client_id)
    new = token_in(reset.stdout)
    assert new != old and "no longer works" in reset.stdout
    with refused(401, "AuthenticationFailed"):
        as_client(server, client_id, old).task(task_id)
    assert as_client(server, client_id, new).task(task_id)["taskQueueId"] == tq

    assert cli("client", "delete", client_id).stdout.strip() == f"Deleted client {client_id}."
    assert cli("client", "delete", client_id, "--json").stdout == ""  # deleting again is no error
    with refused(401, "AuthenticationFailed"):
        as_client(server, client_id, new).task(task_id)
    assert json.loads(cli("client", "list", "--prefix", client_id, "--json").stdout) == []
    assert cli("client", "list", "--prefix", client_id).stdout.strip() == "no clients"


def test_a_client_is_updated_and_disabled_and_its_token_follows(server: Server, cli: Run, tq: str) -> None:
    task_id = create(server.client(), tq)
    client_id = unique("updated")
    made = cli(
        "client", "create", client_id, "--scope", "queue:get-task:*", "--description", "kept", "--json"
    )
    client = as_client(server, client_id, json.loads(made.stdout)["accessToken"])
    with refused(403, "InsufficientScopes"):
        client.status(task_id)

    updated = cli(
        "client", "update", client_id, "--add-scope", "queue:status:*", "--remove-scope", "queue:get-task:*",
        "--expires-in", "3d",
    )  # fmt: skip
    assert f"Updated client {client_id}." in updated.stdout and "queue:status:*" in updated.stdout
    assert client.status(task_id)["status"]["taskId"] == task_id
    with refused(403, "InsufficientScopes"):
        client.task(task_id)
    shown = server.auth_client().client(client_id)
    assert (shown["scopes"], shown["description"]) == (["queue:status:*"], "kept")
    assert timedelta(days=3) - timedelta(minutes=1) < parse(shown["expires"]) - now() <= timedelta(days=3)

    missing = cli("client", "update", client_id, "--remove-scope", "queue:get-task:*", status=1)
    assert "does not hold queue:get-task:*" in missing.stderr and "nothing was changed" in missing.stderr

    disabled = cli("client", "disable", client_id)
    assert f"Disabled client {client_id}." in disabled.stdout and "disabled:     yes" in disabled.stdout
    with refused(401, "AuthenticationFailed"):
        client.status(task_id)
    assert "disabled" in cli("client", "list", "--prefix", client_id).stdout
    assert f"Enabled client {client_id}." in cli("client", "enable", client_id).stdout
    assert client.status(task_id)["status"]["taskId"] == task_id
    cli("client", "delete", client_id)


def test_client_list_pages_through_continuation_tokens(
    server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = unique("paged")
    expires = dates.to_iso(dates.now_ms() + dates.HOUR)
    for n in range(5):
        server.auth_client().createClient(f"{prefix}/{n}", {"description": "d", "expires": expires})
    for name, value in environment(server).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(admin, "PAGE_SIZE", 2)
    assert main.main(["client", "list", "--prefix", prefix, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["clientId"] for c in listed] == [f"{prefix}/{n}" for n in range(5)]


# ---------------------------------------------------------------------------------------------------
# Roles and scopes


def test_roles_are_created_listed_expanded_and_deleted(server: Server, cli: Run) -> None:
    tq = task_queue_id("roles")
    role_id = unique("creator")
    granted = ["queue:create-task:project:none", "queue:scheduler-id:-", f"queue:create-task:lowest:{tq}"]
    created = cli("role", "create", role_id, *[f"--scope={s}" for s in granted], "--description", "makes")
    assert f"Created role {role_id}." in created.stdout and granted[2] in created.stdout
    assert role_id in cli("role", "list").stdout
    assert role_id in [r["roleId"] for r in json.loads(cli("role", "list", "--json").stdout)]

    expected = sorted([f"assume:{role_id}", *granted])
    assert cli("scopes", "expand", f"assume:{role_id}").stdout.splitlines() == expected
    assert json.loads(cli("scopes", "expand", f"assume:{role_id}", "--json").stdout) == {"scopes": expected}
    assumer = unique("assumer")
    made = cli("client", "create", assumer, "--scope", f"assume:{role_id}", "--json").stdout
    create(as_client(server, assumer, json.loads(made)["accessToken"]), tq)

    assert cli("role", "delete", role_id).stdout.strip() == f"Deleted role {role_id}."
    assert cli("scopes", "expand", f"assume:{role_id}").stdout.splitlines() == [f"assume:{role_id}"]
    assert role_id not in cli("role", "list").stdout
    cli("client", "delete", assumer)


def test_a_role_is_updated_scope_by_scope_its_description_kept(server: Server, cli: Run) -> None:
    role_id = unique("updated")
    cli("role", "create", role_id, "--scope", "queue:a", "--scope", "queue:b", "--description", "kept")
    updated = cli("role", "update", role_id, "--add-scope", "queue:c", "--remove-scope", "queue:a")
    assert f"Updated role {role_id}." in updated.stdout
    expanded = cli("scopes", "expand", f"assume:{role_id}").stdout.splitlines()
    assert expanded == [f"assume:{role_id}", "queue:b", "queue:c"]
    shown = json.loads(cli("role", "update", role_id, "--add-scope", "queue:b", "--json").stdout)
    assert (shown["scopes"], shown["description"]) == (["queue:b", "queue:c"], "kept")

    # A scope the role does not grant, as written, stops the command before anything changes.
    refused_ = cli("role", "update", role_id, "--remove-scope", "queue:*", "--add-scope", "queue:d", status=1)
    assert "does not hold queue:*" in refused_.stderr and "nothing was changed" in refused_.stderr
    assert cli("scopes", "expand", f"assume:{role_id}").stdout.splitlines() == expanded

    replaced = json.loads(
        cli("role", "update", role_id, "--scope", "queue:x", "--description", "new", "--json").stdout
    )
    assert (replaced["scopes"], replaced["description"]) == (["queue:x"], "new")
    missing = cli("role", "update", unique("absent"), "--add-scope", "queue:a", status=1)
    assert "does not exist" in missing.stderr, missing.stderr
    cli("role", "delete", role_id)


def test_temporary_credentials_sign_with_their_certificate(server: Server, cli: Run) -> None:
    start = now() - timedelta(minutes=1)
    temporary = taskcluster.createTemporaryCredentials(
        ROOT_CLIENT_ID, server.access_token, start, start + timedelta(hours=1), ["auth:expand-scopes"]
    )
    env = {
        "TASKCLUSTER_CLIENT_ID": temporary["clientId"],
        "TASKCLUSTER_ACCESS_TOKEN": temporary["accessToken"],
        "TASKCLUSTER_CERTIFICATE": temporary["certificate"],
    }
    assert cli("scopes", "expand", "queue:get-task:x", **env).stdout.splitlines() == ["queue:get-task:x"]
    refused_ = cli("role", "list", status=1, **env)
    assert "lacks auth:list-roles" in refused_.stderr
    # The flag wins over the variable: without the certificate the token is not the client's.
    assert "Bad mac" in cli("role", "list", "--certificate", "", status=1, **env).stderr


# ---------------------------------------------------------------------------------------------------
# Errors and configuration


def test_a_refusal_prints_the_servers_message_and_exits_1(server: Server, cli: Run) -> None:
    wrong = "not-the-token-" + uuid.uuid4().hex
    bad_mac = cli("client", "list", status=1, TASKCLUSTER_ACCESS_TOKEN=wrong)
    assert bad_mac.stderr.startswith("taskyard: Unauthorized: Bad mac") and bad_mac.stdout == ""
    assert wrong not in bad_mac.stderr
    unknown = cli("role", "list", status=1, TASKCLUSTER_CLIENT_ID="cli/nobody")
    assert "Client with clientId 'cli/nobody' not found" in unknown.stderr
    static = cli("client", "delete", ROOT_CLIENT_ID, status=1)
    assert "static/" in static.stderr and "InputError" not in static.stderr  # the reason, not the block
    assert "InputError" in cli("client", "delete", ROOT_CLIENT_ID, "--verbose", status=1).stderr
    assert server.access_token not in static.stdout + static.stderr


def test_flags_win_over_the_environment(server: Server) -> None:
    env = {
        "TASKCLUSTER_ROOT_URL": f"http://127.0.0.1:{free_port()}",
        "TASKCLUSTER_CLIENT_ID": "cli/nobody",
        "TASKCLUSTER_ACCESS_TOKEN": "wrong",
    }
    flags = ["--root-url", server.root_url + "/", "--client-id", ROOT_CLIENT_ID]
    # `=`: a token may begin with `-`, which argparse would take for a flag of its own.
    result = run(env, "scopes", "expand", "a:b", *flags, f"--access-token={server.access_token}")
    assert (result.returncode, result.stdout) == (0, "a:b\n"), result.stderr


def test_an_unreachable_server_is_one_clear_line() -> None:
    root_url = f"http://127.0.0.1:{free_port()}"
    env = {"TASKCLUSTER_ROOT_URL": root_url, "TASKCLUSTER_CLIENT_ID": "c", "TASKCLUSTER_ACCESS_TOKEN": "t"}
    result = run(env, "client", "list")
    assert result.returncode == 1 and result.stdout == ""
    assert (
        result.stderr
        == f"taskyard: cannot reach {root_url} (GET /api/auth/v1/clients/): Connection refused\n"
    )


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["role", "list"], {"TASKCLUSTER_ROOT_URL": ""}, "TASKCLUSTER_ROOT_URL"),
        (["role", "list"], {"TASKCLUSTER_ACCESS_TOKEN": ""}, "pass --access-token"),
        (["role", "list", "--client-id", ""], {}, "TASKCLUSTER_CLIENT_ID"),
        (["role", "list"], {"TASKCLUSTER_ROOT_URL": "localhost:8080"}, "http:// or https://"),
        (["role", "list"], {"TASKCLUSTER_CERTIFICATE": "{not json"}, "certificate's JSON"),
        (["client", "create", "x", "--expires", "tomorrow"], {}, "not a date-time"),
        (["client", "create", "x", "--expires-in", "soon"], {}, "not a duration"),
        (
            ["client", "create", "x", "--expires", "2027-01-01T00:00:00Z", "--expires-in", "1d"],
            {},
            "not allowed",
        ),
        (["role", "create", "r"], {}, "--scope"),
        (["role", "update", "r"], {}, "nothing to change: pass --scope, --add-scope"),
        (["client", "update", "c"], {}, "--description, --expires, --expires-in"),
        (
            ["client", "update", "c", "--expires", "2027-01-01T00:00:00Z", "--expires-in", "1d"],
            {},
            "not allowed",
        ),
        (["scopes", "expand"], {}, "SCOPE"),
    ],
)
def test_bad_usage_or_configuration_exits_2(args: list[str], env: dict[str, str], said: str) -> None:
    base = {"TASKCLUSTER_ROOT_URL": "http://127.0.0.1:9", "TASKCLUSTER_CLIENT_ID": "c"}
    result = run({**base, "TASKCLUSTER_ACCESS_TOKEN": "secret-token", **env}, *args)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "secret-token" not in result.stderr + result.stdout


def test_help_names_each_environment_variable() -> None:
    shown = run({}, "client", "create", "--help").stdout
    for _, variable, _ in admin.CONNECTION:
        assert f"[env {variable}]" in " ".join(shown.split())


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("30d", 30 * dates.DAY),
        ("12h", 12 * dates.HOUR),
        ("90 minutes", 90 * dates.MINUTE),
        ("5m", 5 * dates.MINUTE),
        ("5mo", 150 * dates.DAY),
        ("1 year 2 weeks", 379 * dates.DAY),
        ("1d 6h 30s", dates.DAY + 6 * dates.HOUR + 30 * dates.SECOND),
    ],
)
def test_durations_read_as_taskclusters_from_now(text: str, millis: int) -> None:
    assert admin.duration(text) == millis
