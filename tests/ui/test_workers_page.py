"""The queues-and-workers page (`GET /workers`) and a task queue's (`GET /queues/...`)."""

from __future__ import annotations

import re

from taskyard.ui.formats import when
from tests.api.conftest import TASK_QUEUE_ID, Api
from tests.ui.helpers import OTHER_QUEUE, claim, create_many, get, statements_of

WORKER_PATH = "/provisioners/api-prov/worker-types/api-wt/workers/wg/{}"


def worker_row(page: str, worker_id: str) -> str:
    found = re.search(rf'<tr id="worker-wg-{worker_id}"[^>]*>(.*?)</tr>', page, re.S)
    assert found, f"no row for {worker_id}"
    return found[1]


async def test_a_queue_shows_its_counts_workers_what_they_run_and_pending_tasks(api: Api) -> None:
    first, _ = await api.create_task()
    api.clock.advance(1)
    for _ in range(24):
        await api.create_task()
    api.clock.advance(5)
    (claimed,) = await claim(api, worker="busy")
    assert claimed["status"]["taskId"] == first
    answer = await get(api, f"/queues/{TASK_QUEUE_ID}")
    assert answer.status_code == 200
    page = answer.text
    assert re.search(r'class="pending">24<', page) and re.search(r'class="claimed">1<', page)
    row = worker_row(page, "busy")
    assert f'<a class="id" href="/tasks/{first}">{first}</a> run 0' in row
    assert row.count(when(api.clock())) == 2  # first claim and last active
    pending = re.findall(r'<td><a class="id" href="/tasks/([\w-]+)">', page)
    assert len(pending) == 20 and first not in pending
    assert "The first 20 of 24" in page


async def test_a_quarantined_worker_is_marked_with_its_quarantine_until(api: Api) -> None:
    await api.create_task()
    await claim(api, worker="fine")
    await claim(api, worker="shady")
    answer = await api.call(
        "PUT", WORKER_PATH.format("shady"), {"quarantineUntil": "2099-05-01T00:00:00.000Z"}
    )
    assert answer.status_code == 200, answer.text
    page = (await get(api, f"/queues/{TASK_QUEUE_ID}")).text
    shady = worker_row(page, "shady")
    assert "quarantined</span> until 2099-05-01 00:00:00Z" in shady
    assert "quarantined" not in worker_row(page, "fine")
    assert 'class="is-quarantined"' in page
    listing = (await get(api, "/workers")).text
    assert "quarantined</span> until 2099-05-01 00:00:00Z" in listing
    assert listing.count('class="is-quarantined"') == 1


async def test_workers_lists_every_queue_with_its_workers(api: Api) -> None:
    await api.create_task()
    await api.create_task(taskQueueId=OTHER_QUEUE)
    await claim(api, worker="w-one")
    answer = await get(api, "/workers")
    assert answer.status_code == 200
    page = answer.text
    mine = page.index(f'href="/queues/{TASK_QUEUE_ID}"')
    other = page.index(f'href="/queues/{OTHER_QUEUE}"')
    assert mine < page.index("w-one") < other  # the worker is listed under its own queue
    assert "No worker seen." in page[other:]


async def test_an_unknown_queue_is_an_empty_page_and_a_malformed_one_a_400(api: Api) -> None:
    empty = await get(api, "/queues/nobody/here")
    assert empty.status_code == 200
    assert "Nothing is known of this task queue yet" in empty.text
    assert "No worker seen." in empty.text and "No pending task." in empty.text
    for bad in ("no-slash", "a/B", "<script>x/y", "a/b/c"):
        answer = await get(api, f"/queues/{bad}")
        assert answer.status_code == 400, (bad, answer.status_code)
        assert "taskQueueId" in answer.text and "must match" in answer.text
        assert "<script>x" not in answer.text


async def test_html_in_task_names_is_escaped_on_the_queue_page(api: Api) -> None:
    name = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    await api.create_task(
        metadata={"name": name, "description": "d", "owner": "o@example.com", "source": "https://x"}
    )
    page = (await get(api, f"/queues/{TASK_QUEUE_ID}")).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


async def test_the_pages_read_a_fixed_number_of_queries_at_2000_pending(api: Api) -> None:
    await api.create_task()
    await claim(api, worker="w")
    paths = ("/workers", f"/queues/{TASK_QUEUE_ID}")
    before = {path: (await statements_of(api, path))[0] for path in paths}
    await create_many(api, 2_000)
    for path in paths:
        statements, answer = await statements_of(api, path)
        assert statements == before[path], path
    assert re.search(r'class="pending">2000<', answer.text)
