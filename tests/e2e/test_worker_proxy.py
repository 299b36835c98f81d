"""`features.taskclusterProxy`: a real worker gives a task its own proxy, and the task calls the
real server through it with its own scopes, never the worker's.

The tasks are Python scripts run with this interpreter (TaskCluster's client is installed in it);
each writes what it saw to `result.json`, uploaded as an artifact. Claims last two seconds here, so
every run is reclaimed (new credentials) while it runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests
import taskcluster
from yarl import URL

from taskyard.auth import hawk
from taskyard.worker.client import Credentials
from taskyard.worker.proxy import TaskProxy
from tests.e2e import helpers
from tests.e2e.conftest import ROOT_CLIENT_ID, Server, start_server
from tests.e2e.helpers import slug
from tests.e2e.workers import WorkerProcess, create, fetch, log_text, resolved

CLAIM_TIMEOUT = 2
# Reading tasks and statuses takes scopes here (the anonymous role reads public artifacts only).
READ = ["queue:get-task:*", "queue:status:*"]

# What every task script starts with: calls through the proxy with urllib (no credentials).
PRELUDE = """
import json, os, sys, time, urllib.error, urllib.parse, urllib.request
PROXY = os.environ["TASKCLUSTER_PROXY_URL"]
seen = {}

def call(method, path, body=None, base=PROXY):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read() or b"null"), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), dict(error.headers)
"""
WRITE = "\nopen('result.json', 'w').write(json.dumps(seen))\n"


@pytest.fixture(scope="module")
def server(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This module's own server: claims last two seconds, so runs are reclaimed while they run."""
    running = start_server(module_db_url, tmp_path_factory.mktemp("proxy"), claim_timeout=CLAIM_TIMEOUT)
    yield running
    running.stop()


@pytest.fixture
def worker(server: Server, tq: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker running two tasks at once, with a proxy URL and credentials in its own environment
    that no task may see."""
    env = {"TASKCLUSTER_PROXY_URL": "http://127.0.0.1:9/the-workers-own", "TASKCLUSTER_CERTIFICATE": ""}
    process = WorkerProcess(server, tq, tmp_path / "work", args=["--capacity", "2"], env=env).start()
    yield process
    process.stop()


def python_task(queue: taskcluster.Queue, tq: str, script: str, scopes: list[str], **payload: Any) -> str:
    body = PRELUDE + textwrap.dedent(script) + WRITE
    payload = {
        "command": [[sys.executable, "-c", body]],
        "features": {"taskclusterProxy": True},
        "artifacts": [{"type": "file", "path": "result.json", "name": "public/result.json"}],
        **payload,
    }
    return create(queue, tq, payload, scopes=scopes)


def result_of(server: Server, queue: taskcluster.Queue, task_id: str) -> dict[str, Any]:
    run = resolved(queue, task_id)
    response = fetch(server, task_id, "public/result.json")
    assert run["state"] == "completed" and response.status_code == 200, log_text(server, task_id)
    found: dict[str, Any] = response.json()
    return found


def test_a_task_calls_the_api_through_its_proxy_with_its_own_scopes(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    child_queue = f"{tq}-child"
    scopes = [
        *READ,
        "auth:current-scopes",
        f"queue:create-task:lowest:{child_queue}",
        "queue:scheduler-id:-",
        "queue:create-task:project:none",
    ]
    script = """
    task_id = os.environ["TASK_ID"]
    seen["env"] = {k: v for k, v in os.environ.items() if k.startswith(("TASKCLUSTER_", "TASK_", "RUN_"))}
    status, body, headers = call("GET", f"/api/queue/v1/task/{task_id}")
    seen["own"] = [status, body.get("taskQueueId")]
    seen["shortcut"] = call("GET", f"/queue/v1/task/{task_id}")[0]
    seen["current"] = call("GET", "/api/auth/v1/scopes/current")[:2]
    child = json.loads(sys.argv[1])
    seen["allowed"] = call("PUT", "/api/queue/v1/task/" + child["ids"][0], child["allowed"])[:2]
    seen["refused"] = call("PUT", "/api/queue/v1/task/" + child["ids"][1], child["refused"])[:2]
    root = PROXY.rsplit("/", 1)[0]
    seen["no_token"] = call("GET", "/api/queue/v1/ping", base=root)[0]
    seen["wrong_token"] = call("GET", "/api/queue/v1/ping", base=root + "/x" + PROXY.rsplit("/", 1)[1])[0]
    seen["not_api"] = call("GET", "/example.com/path")[0]
    seen["bewit"] = call("POST", "/bewit")[0]  # no URL to sign
    """
    ids = [slug(), slug()]
    child = {
        "ids": ids,
        "allowed": _child(child_queue, "child in an allowed queue"),
        "refused": _child(tq.split("/")[0] + "/elsewhere", "child in a queue the task's scopes don't cover"),
    }
    body = PRELUDE + textwrap.dedent(script) + WRITE
    payload = {
        "command": [[sys.executable, "-c", body, json.dumps(child)]],
        "features": {"taskclusterProxy": True},
        "artifacts": [{"type": "file", "path": "result.json", "name": "public/result.json"}],
    }
    task_id = create(queue, tq, payload, scopes=scopes)
    seen = result_of(server, queue, task_id)

    assert seen["own"] == [200, tq], seen
    assert seen["shortcut"] == 200
    status, current = seen["current"]
    assert status == 200
    assert set(scopes) | {f"queue:create-artifact:{task_id}/0"} <= set(current["scopes"])
    # Not the worker's (root) scopes, nor what the claim's credentials hold beyond the task's.
    assert "*" not in current["scopes"] and f"queue:reclaim-task:{task_id}/0" not in current["scopes"]
    assert seen["allowed"][0] == 200, seen["allowed"][1]["message"]
    assert queue.task(ids[0])["taskQueueId"] == child_queue
    assert seen["refused"][0] == 403 and seen["refused"][1]["code"] == "InsufficientScopes", seen["refused"]
    assert (seen["no_token"], seen["wrong_token"], seen["not_api"], seen["bewit"]) == (403, 403, 404, 400)
    env = seen["env"]
    assert env["TASKCLUSTER_PROXY_URL"].startswith("http://127.0.0.1:")
    assert "the-workers-own" not in env["TASKCLUSTER_PROXY_URL"]
    assert not {"TASKCLUSTER_CLIENT_ID", "TASKCLUSTER_ACCESS_TOKEN", "TASKCLUSTER_CERTIFICATE"} & set(env)
    assert server.access_token not in json.dumps(env)
    assert (env["TASK_ID"], env["RUN_ID"], env["TASKCLUSTER_ROOT_URL"]) == (task_id, "0", server.root_url)
    assert env["TASKCLUSTER_WORKER_GROUP"] == "e2e"
    assert json.loads(env["TASKCLUSTER_WORKER_LOCATION"]) == {"cloud": "static"}


def test_the_proxy_signs_with_the_new_credentials_after_a_reclaim(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    script = f"""
    path = "/api/queue/v1/task/" + os.environ["TASK_ID"]
    status, _, headers = call("GET", path)
    seen["before"] = [status, headers["X-Taskcluster-Proxy-Temp-ClientId"]]
    time.sleep({CLAIM_TIMEOUT * 1.5})  # the worker reclaims halfway to takenUntil: at least once by now
    status, _, headers = call("GET", path)
    seen["after"] = [status, headers["X-Taskcluster-Proxy-Temp-ClientId"]]
    """
    seen = result_of(server, queue, python_task(queue, tq, script, READ))
    assert seen["before"][0] == seen["after"][0] == 200
    # A temporary clientId names the claim's end (`.../until/<takenUntil>`): a reclaim's differs.
    assert seen["before"][1] != seen["after"][1]


def test_two_tasks_at_once_get_their_own_proxies(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    """Running together, each task finds the other's proxy port but not its token: refused."""
    script = """
    seen["url"] = PROXY
    seen["own"] = call("GET", "/api/queue/v1/task/" + os.environ["TASK_ID"])[0]
    meeting = sys.argv[1]
    open(os.path.join(meeting, os.environ["TASK_ID"]), "w").write(PROXY)
    while len(os.listdir(meeting)) < 2:  # both running at once (the test's timeout bounds it)
        time.sleep(0.05)
    other = [n for n in os.listdir(meeting) if n != os.environ["TASK_ID"]][0]
    other_url = open(os.path.join(meeting, other)).read()
    other_port = other_url.rsplit("/", 1)[0]
    my_token = PROXY.rsplit("/", 1)[1]
    seen["other_port"] = call("GET", "/api/queue/v1/task/" + other, base=other_port + "/" + my_token)[0]
    done = meeting + "-done"
    open(os.path.join(done, os.environ["TASK_ID"]), "w").close()
    while len(os.listdir(done)) < 2:  # the other's proxy stays up until it has called this one's
        time.sleep(0.05)
    """
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    (tmp_path / "meeting-done").mkdir()
    body = PRELUDE + textwrap.dedent(script) + WRITE
    payload = {
        "command": [[sys.executable, "-c", body, str(meeting)]],
        "features": {"taskclusterProxy": True},
        "artifacts": [{"type": "file", "path": "result.json", "name": "public/result.json"}],
    }
    ids = [create(queue, tq, payload, scopes=READ) for _ in range(2)]
    first, second = (result_of(server, queue, task_id) for task_id in ids)
    assert first["own"] == second["own"] == 200
    assert first["url"].rsplit("/", 1) != second["url"].rsplit("/", 1)  # port and token both differ
    assert first["url"].rsplit("/", 1)[1] != second["url"].rsplit("/", 1)[1]
    assert first["other_port"] == second["other_port"] == 403
    # Each stopped with its task: nothing listens on its port any more.
    for url in (first["url"], second["url"]):
        with pytest.raises(requests.ConnectionError):
            requests.get(url + "/api/queue/v1/ping", timeout=10)


def test_taskclusters_python_client_works_through_the_proxy(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    """As taskgraph builds its clients in a task: rootUrl = the proxy URL, no credentials."""
    script = """
    import requests, taskcluster
    options = {"rootUrl": PROXY, "maxRetries": 0}
    task_id = os.environ["TASK_ID"]
    tc_queue = taskcluster.Queue(options)
    seen["task"] = tc_queue.task(task_id)["taskQueueId"]
    seen["statuses"] = [s["taskId"] for s in tc_queue.statuses({"taskIds": [task_id]})["statuses"]]
    seen["latest"] = tc_queue.getLatestArtifact(sys.argv[1], "public/data.json")
    seen["content"] = requests.get(seen["latest"]["url"], timeout=30).text  # as taskgraph does
    seen["current"] = taskcluster.Auth(options).currentScopes()["scopes"]
    seen["index"] = taskcluster.Index(options).findTasksAtIndex({"indexes": ["no.such.namespace"]})
    """
    producer = create(
        queue,
        tq,
        {
            "command": [["/bin/sh", "-c", "echo '{\"a\": 1}' > data.json"]],
            "artifacts": [{"type": "file", "path": "data.json", "name": "public/data.json"}],
        },
    )
    assert resolved(queue, producer)["state"] == "completed"
    body = PRELUDE + textwrap.dedent(script) + WRITE
    payload = {
        "command": [[sys.executable, "-c", body, producer]],
        "features": {"taskclusterProxy": True},
        "artifacts": [{"type": "file", "path": "result.json", "name": "public/result.json"}],
    }
    task_id = create(queue, tq, payload, scopes=[*READ, "auth:current-scopes", "index:find-task:*"])
    seen = result_of(server, queue, task_id)
    assert seen["task"] == tq
    assert seen["statuses"] == [task_id]
    assert json.loads(seen["content"]) == {"a": 1}
    assert "auth:current-scopes" in seen["current"] and "*" not in seen["current"]
    assert seen["index"]["tasks"] == []


def _child(task_queue: str, name: str) -> dict[str, Any]:
    from tests.e2e.workers import task

    body = task(task_queue, {"command": [["true"]]})
    body["metadata"]["name"] = name
    return body


def test_a_task_without_the_feature_gets_no_proxy_url_not_even_the_workers(
    server: Server, queue: taskcluster.Queue, tq: str, worker: WorkerProcess
) -> None:
    script = 'test -z "$TASKCLUSTER_PROXY_URL" && test -z "$TASKCLUSTER_ACCESS_TOKEN" && test -n "$TASK_ID"'
    task_id = create(queue, tq, {"command": [["/bin/sh", "-c", script]]})
    assert resolved(queue, task_id)["state"] == "completed", log_text(server, task_id)


# The proxy itself, in this process, against the module's server -------------------------------


def proxy_for(server: Server, root_url: str | None = None, scopes: list[str] | None = None) -> TaskProxy:
    """A TaskProxy signing with temporary credentials of the root client, as a run's are made."""
    start = int(time.time() * 1000) - 60_000
    temp = hawk.temporary_credentials(ROOT_CLIENT_ID, server.access_token, ["*"], start, start + 3_600_000)
    creds = Credentials(temp["clientId"], temp["accessToken"], temp["certificate"])
    return TaskProxy(root_url or server.root_url, lambda: creds, scopes or ["*"])


async def test_the_proxy_passes_paths_queries_bodies_and_redirects_as_sent(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    group = slug()
    ids = [helpers.create(queue, tq, taskGroupId=group) for _ in range(2)]
    claim = helpers.claim_one(queue, tq)
    task_id = claim["status"]["taskId"]
    target = "https://example.com/somewhere?x=1"
    reference = {"storageType": "reference", "expires": helpers.iso(helpers.now() + timedelta(hours=1))}
    queue.createArtifact(
        task_id, "0", "public/a/ref", {**reference, "url": target, "contentType": "text/plain"}
    )
    big_id = slug()
    big = helpers.definition(tq, taskGroupId=group, extra={"blob": "x" * 400_000})
    proxy = proxy_for(server)
    url = await proxy.start()
    try:
        async with aiohttp.ClientSession() as http:
            # An encoded "/" stays encoded; the 303 comes back, not followed.
            artifact = f"{url}/api/queue/v1/task/{task_id}/runs/0/artifacts/public%2Fa%2Fref"
            async with http.get(artifact, allow_redirects=False) as answer:
                assert answer.status == 303 and answer.headers["Location"] == target
            # The query goes as sent, byte for byte (%31 is "1", still encoded): as it was signed.
            async with http.get(
                URL(f"{url}/api/queue/v1/task-group/{group}/list?limit=%31", encoded=True)
            ) as answer:
                listed = await answer.json()
                assert answer.status == 200 and len(listed["tasks"]) == 1 and listed["continuationToken"]
            # A large body streams through, its answer too.
            async with http.put(f"{url}/api/queue/v1/task/{big_id}", json=big) as answer:
                assert answer.status == 200, await answer.text()
            async with http.get(f"{url}/api/queue/v1/task/{big_id}") as answer:
                assert (await answer.json())["extra"]["blob"] == "x" * 400_000
            # Odd paths: the server's own 404, never a 401 or a 500.
            async with http.get(f"{url}/api/queue/v1/no%zzsuch") as answer:
                assert answer.status == 404
            async with http.get(f"{url}/api/queue") as answer:
                assert answer.status == 404
                assert "not a TaskCluster API path" in (await answer.json())["message"]
            async with http.get(url) as answer:
                assert answer.status == 404
    finally:
        await proxy.stop()
    assert set(ids) <= {t["status"]["taskId"] for t in queue.listTaskGroup(group)["tasks"]}


async def test_fifty_calls_at_once_go_through(server: Server, queue: taskcluster.Queue, tq: str) -> None:
    """As taskgraph creates a graph's tasks: up to 50 createTask calls at a time."""
    proxy = proxy_for(server)
    url = await proxy.start()
    ids = [slug() for _ in range(50)]
    group = slug()
    try:
        async with aiohttp.ClientSession() as http:

            async def create_one(task_id: str) -> int:
                body = helpers.definition(tq, taskGroupId=group)
                async with http.put(f"{url}/api/queue/v1/task/{task_id}", json=body) as answer:
                    return answer.status

            statuses = await asyncio.gather(*(create_one(task_id) for task_id in ids))
    finally:
        await proxy.stop()
    assert statuses == [200] * 50
    assert {t["status"]["taskId"] for t in queue.listTaskGroup(group)["tasks"]} == set(ids)


async def test_bewit_signs_a_url_with_the_tasks_scopes(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = helpers.create(queue, tq)
    target = f"{server.root_url}/api/queue/v1/task/{task_id}"
    anonymous = requests.get(target, timeout=30)
    assert anonymous.status_code == 403  # reading a task takes a scope the anonymous role lacks
    allowed, denied = proxy_for(server, scopes=["queue:get-task:*"]), proxy_for(server, scopes=["none"])
    urls = [await allowed.start(), await denied.start()]
    try:
        async with aiohttp.ClientSession() as http:
            signed = []
            for url in urls:
                async with http.post(f"{url}/bewit", data=target, allow_redirects=False) as answer:
                    assert answer.status == 303
                    assert answer.headers["Location"] == await answer.text()
                    signed.append(answer.headers["Location"])
            async with http.post(f"{urls[0]}/bewit", data="not a url") as answer:
                assert answer.status == 400
            async with http.put(f"{urls[0]}/credentials", data="{}") as answer:
                assert answer.status == 404
    finally:
        await allowed.stop()
        await denied.stop()
    # The signed URLs work without credentials, with the scopes of the proxy that signed them.
    assert requests.get(signed[0], timeout=30).json()["taskQueueId"] == tq
    assert requests.get(signed[1], timeout=30).status_code == 403


async def test_the_proxy_answers_502_when_the_server_is_unreachable(server: Server) -> None:
    proxy = proxy_for(server, root_url="http://127.0.0.1:1")
    url = await proxy.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/api/queue/v1/ping") as answer:
            assert answer.status == 502
            assert (await answer.json())["code"] == "ProxyUnreachable"
    finally:
        await proxy.stop()


async def test_curl_can_send_a_body_through_the_proxy(
    server: Server, queue: taskcluster.Queue, tq: str
) -> None:
    """curl sends `Expect: 100-continue` with a body over 1 kB, and waits for the 100."""
    proxy = proxy_for(server)
    url = await proxy.start()
    task_id = slug()
    body = json.dumps(helpers.definition(tq, extra={"pad": "x" * 5000}))
    try:
        curl = await asyncio.create_subprocess_exec(
            "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
            "-H", "Content-Type: application/json", "-H", "Expect: 100-continue", "--data-binary", "@-",
            "--expect100-timeout", "30", "--max-time", "20", f"{url}/api/queue/v1/task/{task_id}",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await curl.communicate(body.encode())
    finally:
        await proxy.stop()
    assert out == b"200"
    assert queue.task(task_id)["extra"]["pad"] == "x" * 5000
