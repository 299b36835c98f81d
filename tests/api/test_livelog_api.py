"""The live log through the app: appendLiveLog (Hawk, scopes, bodies) and the signed stream URL."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import pytest

from taskyard.api.app import build_app
from taskyard.queue import livelogs
from tests.api.conftest import TASK_QUEUE_ID, Api, assert_error
from tests.api.helpers import NAME, append, running_task
from tests.conftest import until

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")


async def started(api: Api, data: str = "hello\n") -> tuple[str, str]:
    """A running task whose live log holds `data`; answers the task and the stream URL."""
    task_id, creds = await running_task(api)
    response = await append(api, task_id, creds, {"offset": 0, "data": data})
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"length", "url"}
    return task_id, response.json()["url"]


async def test_task_credentials_append_and_others_are_refused(api: Api) -> None:
    task_id, creds = await running_task(api)
    other_task, other_creds = await running_task(api, "w2")
    body = {"offset": 0, "data": "hello\n"}
    assert_error(await append(api, task_id, other_creds, body), 403, "InsufficientScopes")
    assert_error(await append(api, task_id, None, body), 403, "InsufficientScopes")
    ok = await append(api, task_id, creds, body)
    assert ok.status_code == 200, ok.text
    assert ok.json()["length"] == 6
    retried = await append(api, task_id, creds, body)
    assert retried.json() == ok.json()
    gap = await append(api, task_id, creds, {"offset": 9, "data": "x"})
    assert_error(gap, 409, "RequestConflict", names=["length is 6"])
    other_name = await append(api, task_id, creds, {"offset": 6, "data": "x"}, name="public/other.log")
    assert_error(other_name, 409, "RequestConflict", names=[NAME])
    final = await append(api, task_id, creds, {"offset": 6, "data": "bye\n", "final": True})
    assert final.json() == {"length": 10, "url": ok.json()["url"]}
    assert (await append(api, other_task, other_creds, body)).status_code == 200


BAD_BODIES = [
    ({"data": "x"}, "body.offset"),
    ({"offset": -1, "data": "x"}, "body.offset"),
    ({"offset": "0", "data": "x"}, "body.offset"),
    ({"offset": 0}, "body.data"),
    ({"offset": 0, "data": 5}, "body.data"),
    ({"offset": 0, "data": "é" * (512 * 1024 + 1)}, "body.data"),  # 1 MiB + 2 bytes
    ({"offset": 0, "data": "x", "final": "yes"}, "body.final"),
    ({"offset": 0, "data": "x", "extra": 1}, "extra"),
    ([], "body"),
]


async def test_bad_bodies_are_400_naming_the_field(api: Api) -> None:
    task_id, creds = await running_task(api)
    for body, field in BAD_BODIES:
        assert_error(await append(api, task_id, creds, body), 400, "InputValidationError", names=[field])


async def test_bad_names_and_states(api: Api) -> None:
    task_id, creds = await running_task(api)
    bad = await append(api, task_id, creds, {"offset": 0, "data": "x"}, name="public/%2E%2E/x")
    assert_error(bad, 400, "InvalidRequestArguments", names=["name"])
    run1 = await api.call("POST", f"/task/{task_id}/runs/1/live-log/{NAME}", {"offset": 0, "data": "x"})
    assert_error(run1, 404, "ResourceNotFound")
    assert (await api.call("POST", f"/task/{task_id}/runs/0/completed", creds=creds)).status_code == 200
    late = await append(api, task_id, creds, {"offset": 0, "data": "x"})
    assert_error(late, 409, "RequestConflict", names=["completed", "closed"])


async def test_the_artifact_leads_to_the_stream(api: Api) -> None:
    task_id, url = await started(api, "héllo\n")
    redirect = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/{NAME}", creds=None)
    assert redirect.status_code == 303, redirect.text
    assert redirect.headers["location"] == url
    assert redirect.headers["x-taskcluster-artifact-storage-type"] == "reference"
    stream = await api.client.get(url + "&follow=0")
    assert stream.status_code == 200
    assert stream.headers["content-type"] == "text/plain; charset=utf-8"
    assert stream.headers["cache-control"] == "no-store"
    assert stream.headers["x-accel-buffering"] == "no"
    assert stream.text == "héllo\n"


async def test_follow_streams_new_chunks_until_final(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 60.0)  # woken by the append, not by the re-check
    task_id, creds = await running_task(api)
    url = (await append(api, task_id, creds, {"offset": 0, "data": "one\n"})).json()["url"]
    reading = asyncio.create_task(api.client.get(url))
    await until(lambda: api.queue.live_log_followers.watching(f"{task_id}/0") == 1)
    await asyncio.sleep(0.05)
    assert (await append(api, task_id, creds, {"offset": 4, "data": "two\n"})).status_code == 200
    assert not reading.done()
    assert (await append(api, task_id, creds, {"offset": 8, "data": "", "final": True})).status_code == 200
    response = await asyncio.wait_for(reading, 5)
    assert (response.status_code, response.text) == (200, "one\ntwo\n")


async def test_follow_ends_when_the_run_is_resolved(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 0.05)
    task_id, creds = await running_task(api)
    url = (await append(api, task_id, creds, {"offset": 0, "data": "one\n"})).json()["url"]
    reading = asyncio.create_task(api.client.get(url + "&follow=1"))
    await until(lambda: api.queue.live_log_followers.watching(f"{task_id}/0") == 1)
    await append(api, task_id, creds, {"offset": 4, "data": "two\n"})
    assert (await api.call("POST", f"/task/{task_id}/runs/0/failed", creds=creds)).status_code == 200
    response = await asyncio.wait_for(reading, 5)
    assert response.text == "one\ntwo\n"


async def test_follow_0_answers_at_once(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 60.0)
    _, url = await started(api)
    response = await asyncio.wait_for(api.client.get(url + "&follow=0"), 5)
    assert response.text == "hello\n"


async def test_a_client_that_leaves_stops_its_follower(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx's ASGI transport never disconnects, so this speaks ASGI to the app itself."""
    monkeypatch.setattr(livelogs, "RECHECK_SECONDS", 60.0)
    task_id, url = await started(api)
    path, query = url.removeprefix("http://testserver").split("?")
    requested, leave, sent = asyncio.Event(), asyncio.Event(), []

    async def receive() -> dict[str, Any]:
        if not requested.is_set():
            requested.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 40000),
    }
    serving = asyncio.create_task(build_app(api.services)(scope, receive, send))
    await until(lambda: api.queue.live_log_followers.watching(f"{task_id}/0") == 1)
    await asyncio.sleep(0.05)
    assert not serving.done()
    leave.set()
    await asyncio.wait_for(serving, 5)
    assert api.queue.live_log_followers.watching(f"{task_id}/0") == 0
    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"hello\n"


async def test_bad_or_expired_signatures_are_403(api: Api) -> None:
    task_id, url = await started(api)
    base, query = url.split("?")
    for bad in (
        base,
        base + "?" + query.replace("s=", "s=x"),
        base.replace(f"{task_id}/0", f"{task_id}/1") + "?" + query,
        base + "?" + query.replace("e=", "e=1"),
        base + "?e=abc&s=x",
    ):
        assert_error(await api.client.get(bad), 403, "InsufficientScopes")
    api.clock.advance(2 * 3600)
    assert_error(await api.client.get(url), 403, "InsufficientScopes", names=["expired"])


async def test_a_run_without_a_live_log_is_404(api: Api) -> None:
    task_id, _ = await running_task(api)
    url = livelogs.stream_url(api.queue, task_id, 0, api.clock() + 60_000)
    assert_error(await api.client.get(url), 404, "ResourceNotFound", names=["no live log"])


@pytest.mark.parametrize("task_id", ["\x00" * 22, "x" * 300, "not-a-slug", "\u6f22"])
async def test_a_stream_url_for_no_task_id_is_400_even_when_signed(api: Api, task_id: str) -> None:
    """Only real tasks' URLs are signed; a NUL in one reached PostgreSQL, which refused it: a 500."""
    url = livelogs.stream_url(api.queue, task_id, 0, api.clock() + 60_000)
    base, query = url.split("?")
    base = base.replace(task_id, quote(task_id, safe=""))
    assert_error(await api.client.get(base + "?" + query), 400, "InvalidRequestArguments", names=["taskId"])


async def test_the_stream_starts_at_the_byte_asked(api: Api) -> None:
    task_id, creds = await running_task(api)
    url = (await append(api, task_id, creds, {"offset": 0, "data": "one\n"})).json()["url"]
    await append(api, task_id, creds, {"offset": 4, "data": "twö\n"})
    await append(api, task_id, creds, {"offset": 9, "data": "three\n"})
    whole = "one\ntwö\nthree\n".encode()
    for start in (0, 4, 6, 7, 12, 15, 99):  # 7: inside ö's two bytes; 15: the end
        answer = await api.client.get(f"{url}&follow=0&start={start}")
        assert (answer.status_code, answer.content) == (200, whole[start:]), start
    for bad in ("-1", "x", "1e3", "9" * 19, ""):
        assert_error(await api.client.get(f"{url}&follow=0&start={bad}"), 400, "InvalidRequestArguments")
