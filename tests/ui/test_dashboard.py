"""The dashboard (`GET /`) and the header's search (`GET /find`), in process on both databases."""

from __future__ import annotations

import html
import re

from taskyard.events.memory import MemoryBus
from taskyard.events.outbox import OutboxRelay
from taskyard.model import slugid
from tests.api.conftest import TASK_QUEUE_ID, Api
from tests.ui.helpers import OTHER_QUEUE, claim, create_many, get, statements_of


def queue_row(page: str, task_queue_id: str) -> str:
    """The dashboard's table row of `task_queue_id`."""
    found = re.search(rf'<tr data-queue="{re.escape(task_queue_id)}">(.*?)</tr>', page, re.S)
    assert found, f"no row for {task_queue_id}"
    return found[1]


def number(row: str, column: str) -> int:
    found = re.search(rf'class="num {column}">(\d+)', row)
    assert found, f"no {column} in {row}"
    return int(found[1])


async def relay(api: Api) -> None:
    """Publish what is in the outbox, at the test's clock, as `taskyard serve`'s relay does."""
    bus = MemoryBus()
    relay = OutboxRelay(api.queue.storage, bus, clock=api.clock)
    while await relay.relay_once():
        pass
    await bus.close()


async def test_a_new_deployment_says_no_tasks_yet_and_how_to_create_one(api: Api) -> None:
    answer = await get(api, "/")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert "No tasks yet" in answer.text
    assert "taskyard task create hello.yml" in answer.text
    assert 'href="/tasks/create"' in answer.text


async def test_each_queue_shows_pending_running_oldest_age_and_recent_claims(api: Api) -> None:
    for _ in range(3):
        await api.create_task()
    await api.create_task(taskQueueId=OTHER_QUEUE)
    api.clock.advance(90)
    (claimed,) = await claim(api)
    await relay(api)
    page = (await get(api, "/")).text
    assert "No tasks yet" not in page
    row = queue_row(page, TASK_QUEUE_ID)
    assert (number(row, "pending"), number(row, "claimed"), number(row, "claims")) == (2, 1, 1)
    assert "1 min 30 s" in row  # the oldest pending task waited 90 s
    assert number(row, "workers") == 1
    other = queue_row(page, OTHER_QUEUE)
    assert (number(other, "pending"), number(other, "claimed"), number(other, "claims")) == (1, 0, 0)
    assert f'href="/queues/{TASK_QUEUE_ID}"' in page

    api.clock.advance(61)  # the claim is now more than a minute old
    row = queue_row((await get(api, "/")).text, TASK_QUEUE_ID)
    assert number(row, "claims") == 0
    assert claimed["status"]["taskId"]


async def test_recent_groups_link_to_their_page_with_counts_by_state(api: Api) -> None:
    group = slugid.nice()
    for _ in range(2):
        await api.create_task(taskGroupId=group)
    await claim(api)
    older = slugid.nice()
    api.clock.advance(-60)
    await api.create_task(taskGroupId=older, taskQueueId=OTHER_QUEUE)
    page = (await get(api, "/")).text
    found = re.search(rf'<a class="id" href="/groups/{group}">{group}</a>(.*?)</tr>', page, re.S)
    assert found, page
    counts = re.findall(r"<td class=\"num\">(?:<span[^>]*>)?(\d+)", found[1])
    # tasks, then unscheduled, pending, running, completed, failed, exception
    assert [int(c) for c in counts] == [2, 0, 1, 1, 0, 0, 0]
    assert page.index(f"/groups/{group}") < page.index(f"/groups/{older}")  # the newest first


async def test_only_the_twenty_latest_groups_are_shown(api: Api) -> None:
    groups = []
    for _ in range(22):
        groups.append(slugid.nice())
        await api.create_task(taskGroupId=groups[-1])
        api.clock.advance(1)
    page = (await get(api, "/")).text
    shown = [g for g in groups if f"/groups/{g}" in page]
    assert shown == groups[2:]


async def test_quarantined_workers_are_marked_by_their_queue(api: Api) -> None:
    await api.create_task()
    await claim(api, worker="good")
    await claim(api, worker="bad")
    until = "2099-01-01T00:00:00.000Z"
    path = "/provisioners/api-prov/worker-types/api-wt/workers/wg/bad"
    answer = await api.call("PUT", path, {"quarantineUntil": until})
    assert answer.status_code == 200, answer.text
    row = queue_row((await get(api, "/")).text, TASK_QUEUE_ID)
    assert number(row, "workers") == 2
    assert re.search(r'class="quarantined"[^>]*>wg/bad</a>', row)
    assert "2099-01-01 00:00:00Z" in row
    assert "wg/good" not in row


async def test_the_page_reads_a_fixed_number_of_queries_at_2000_pending(api: Api) -> None:
    await api.create_task()
    few, _ = await statements_of(api, "/")
    await create_many(api, 2_000)
    await create_many(api, 5, taskQueueId=OTHER_QUEUE)
    many, answer = await statements_of(api, "/")
    assert number(queue_row(answer.text, TASK_QUEUE_ID), "pending") == 2_001
    assert many == few
    assert few <= 12


async def test_find_opens_a_task_or_a_group(api: Api) -> None:
    group = slugid.nice()
    task_id, _ = await api.create_task(taskGroupId=group)
    task = await get(api, f"/find?id={task_id}")
    assert (task.status_code, task.headers["location"]) == (303, f"/tasks/{task_id}")
    found = await get(api, f"/find?id=+{group}+")
    assert (found.status_code, found.headers["location"]) == (303, f"/groups/{group}")


async def test_find_says_nothing_was_found_or_names_the_rule(api: Api) -> None:
    unknown = slugid.nice()
    missing = await get(api, f"/find?id={unknown}")
    assert missing.status_code == 404
    assert "Nothing was found" in missing.text and unknown in missing.text
    for bad in ("<script>alert(1)</script>", "", "x" * 5000):
        answer = await api.client.get("/find", params={"id": bad}, headers={"accept": "text/html"})
        assert answer.status_code == 400
        assert "must be 22 characters" in answer.text or "Type a taskId" in answer.text
        assert "<script>alert" not in answer.text
    hostile = await api.client.get("/find", params={"id": "<b>x</b>"})
    assert html.escape("<b>x</b>") in hostile.text and "<b>x</b>" not in hostile.text
