"""Live updates of the UI (`/ui/live/groups/...`, `/ui/live/tasks/...`) on both databases, from a
real server in this process (server-sent events need one that streams), fed by the event feed
the tests drive as `taskyard serve` would (see tests/api/test_events_stream.py)."""

from __future__ import annotations

import html
import re
from typing import Any, cast

import httpx
import orjson

from taskyard.events.feed import EventFeed
from taskyard.events.profiles import SEED_PREFIX, TC_PREFIX, Profiles
from taskyard.model import dates, slugid
from taskyard.storage.port import Storage
from taskyard.ui import live
from tests.api.conftest import Api, Served
from tests.api.helpers import Reader, following
from tests.ui.helpers import make_group, resolve


async def data(reader: Reader) -> dict[str, Any]:
    """The next message's data (every live message is a JSON object with a `type`)."""
    fields = await reader.event()
    assert "event" not in fields, fields  # all are plain messages, told apart by `type`
    found: dict[str, Any] = orjson.loads(fields["data"])
    return found


async def next_of(reader: Reader, kind: str) -> dict[str, Any]:
    while (found := await data(reader))["type"] != kind:
        pass
    return found


async def test_a_group_stream_sends_its_counts_then_each_change_of_its_tasks(
    served: Served, api: Api
) -> None:
    group, (one, two) = await make_group(api, ["one", "two"])
    _, (elsewhere,) = await make_group(api, ["another group's"])
    await served.publish()
    async with following(f"{served.url}/ui/live/groups/{group}", None) as reader:
        assert reader.last_id == str(served.feed.position)
        opening = await data(reader)
        assert opening["type"] == "counts" and opening["taskGroupId"] == group
        assert opening["total"] == 2 and opening["counts"]["pending"] == 2
        assert list(opening["counts"])[:6] == [
            "unscheduled",
            "pending",
            "running",
            "completed",
            "failed",
            "exception",
        ]
        await resolve(api, elsewhere, "completed")
        await resolve(api, two, "failed", took=3)
        await served.publish()
        running, failed = await data(reader), await data(reader)
        assert (running["type"], running["event"], running["taskId"], running["state"]) == (
            "task",
            "task-running",
            two,
            "running",
        )
        assert (failed["event"], failed["state"], failed["runs"]) == ("task-failed", "failed", 1)
        assert failed["duration"] == "3.0 s" and failed["durationMs"] == 3000
        assert failed["worker"] == "wg-1/worker-7" and failed["taskGroupId"] == group
        assert failed["status"]["runs"][0]["state"] == "failed"
        counts = await next_of(reader, "counts")  # read from the database, at most once a second
        assert counts["counts"]["failed"] == 1 and counts["counts"]["pending"] == 1
        assert one not in str(counts)


async def test_a_new_task_of_the_group_is_announced_as_defined(served: Served, api: Api) -> None:
    group, _ = await make_group(api, ["one"])
    await served.publish()
    async with following(f"{served.url}/ui/live/groups/{group}", None) as reader:
        await next_of(reader, "counts")
        (new,) = await make_group_in(api, group, ["late"])
        await served.publish()
        defined = await next_of(reader, "task")
        assert (defined["event"], defined["taskId"], defined["state"]) == ("task-defined", new, "unscheduled")


async def make_group_in(api: Api, group: str, names: list[str]) -> list[str]:
    made = []
    for name in names:
        metadata = {"name": name, "description": "d", "owner": "o@example.com", "source": "https://x"}
        made.append((await api.create_task(taskGroupId=group, metadata=metadata))[0])
    return made


async def test_a_task_stream_follows_that_task_and_its_artifacts(served: Served, api: Api) -> None:
    _, (task_id, other) = await make_group(api, ["mine", "not mine"])
    await served.publish()
    async with following(f"{served.url}/ui/live/tasks/{task_id}", None) as reader:
        await resolve(api, other, "completed")
        await resolve(api, task_id, "exception")
        await served.publish()
        running, exception = await data(reader), await data(reader)
    assert running["taskId"] == task_id and running["state"] == "running"
    assert (exception["event"], exception["state"]) == ("task-exception", "exception")
    async with following(f"{served.url}/ui/live/tasks/{other}", None) as reader:
        rerun = await api.call("POST", f"/task/{other}/rerun")
        assert rerun.status_code == 200, rerun.text
        await served.publish()
        pending = await data(reader)
        assert (pending["event"], pending["state"], pending["runs"]) == ("task-pending", "pending", 2)
        assert pending["duration"] == "" and pending["worker"] == ""


async def test_the_pages_position_replays_what_happened_before_the_stream_opened(
    served: Served, api: Api
) -> None:
    group, (task_id,) = await make_group(api, ["one"])
    await served.publish()
    async with httpx.AsyncClient() as client:
        page = (await client.get(f"{served.url}/groups/{group}")).text
    url = html.unescape(re.findall(r'data-live="([^"]+)"', page)[0])
    assert url == f"/ui/live/groups/{group}?after={served.feed.position}"
    await resolve(api, task_id, "completed")  # after the page was read, before its stream opens
    await served.publish()
    async with following(served.url + url, None) as reader:
        replayed = [await data(reader) for _ in range(2)]
        assert [(m["event"], m["taskId"]) for m in replayed] == [
            ("task-running", task_id),
            ("task-completed", task_id),
        ]
        counts = await next_of(reader, "counts")
        assert counts["counts"]["completed"] == 1


async def test_a_reconnecting_browser_resumes_from_its_last_event_id(served: Served, api: Api) -> None:
    _, (task_id,) = await make_group(api, ["one"])
    await served.publish()
    async with following(f"{served.url}/ui/live/tasks/{task_id}", None) as reader:
        start = reader.last_id
    await resolve(api, task_id, "completed")
    await served.publish()
    headers = {"last-event-id": str(start)}
    async with following(f"{served.url}/ui/live/tasks/{task_id}?after=0", None, headers) as reader:
        assert (await data(reader))["event"] == "task-running"
        completed_id = reader.last_id
        assert (await data(reader))["event"] == "task-completed"
    assert completed_id is not None


async def test_unknown_or_bad_ids_and_positions_are_refused_before_streaming(
    served: Served, api: Api
) -> None:
    _, (task_id,) = await make_group(api, ["one"])
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        for path, status in [
            (f"/ui/live/groups/{slugid.nice()}", 404),
            (f"/ui/live/tasks/{slugid.nice()}", 404),
            ("/ui/live/groups/not-a-slugid", 400),
            ("/ui/live/tasks/%3Cscript%3E", 400),
            (f"/ui/live/tasks/{task_id}?after=soon", 400),
            (f"/ui/live/tasks/{task_id}?after=-1", 400),
        ]:
            answer = await client.get(path, headers={"accept": "text/html"})
            assert answer.status_code == status, (path, answer.text)
            assert answer.headers["content-type"].startswith("text/html")


def test_a_deployment_publishing_only_the_seed_profile_is_followed_on_its_exchanges() -> None:
    storage = cast(Storage, None)  # the feed is not started: bindings read only its profiles
    seed = EventFeed(storage, Profiles(["seed"]))
    found = live.bindings(seed, ("*",) * 7 + ("GROUP",))
    assert (SEED_PREFIX + "task-failed", "*.*.*.*.*.*.*.GROUP.#") in found
    assert all(exchange.startswith(SEED_PREFIX) for exchange, _ in found)
    both = EventFeed(storage, Profiles(["tc", "seed"]))
    found = live.bindings(both, ("TASK",), artifacts=True)
    assert (TC_PREFIX + "artifact-created", "primary.TASK.#") in found
    assert all(exchange.startswith(TC_PREFIX) for exchange, _ in found)


def test_a_seed_message_becomes_the_same_task_update() -> None:
    now = dates.now_ms()
    status = {
        "taskId": "T",
        "taskGroupId": "G",
        "state": "running",
        "runs": [
            {
                "runId": 0,
                "state": "running",
                "started": dates.to_iso(now - 1500),
                "workerGroup": "g",
                "workerId": "w",
            }
        ],
    }
    update = live.task_update(SEED_PREFIX + "task-running", {"version": "0.2.0", "status": status}, now)
    assert update is not None
    assert (update["event"], update["state"], update["duration"], update["worker"]) == (
        "task-running",
        "running",
        "1.5 s",
        "g/w",
    )
    assert live.task_update(TC_PREFIX + "task-running", {"no": "status"}, now) is None
    assert live.task_update(TC_PREFIX + "task-running", ["not", "an", "object"], now) is None
