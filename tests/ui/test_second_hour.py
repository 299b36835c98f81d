"""What a newcomer's second hour with the web UI hit (issue 34), in process, on both databases:
the sign-in page's wording, the favicon, the header's box left empty, an artifact linked before it
can be fetched, the runs' time axis and a rerun's run, and re-creating a task from its page."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from taskyard.artifacts.local import LocalStore
from taskyard.model import dates, slugid
from taskyard.model.guard import ALLOW_ALL
from taskyard.queue import claims
from taskyard.ui import task
from tests.api.conftest import TASK_QUEUE_ID, Api
from tests.conftest import FakeClock
from tests.ui.conftest import Browser, hidden_fields
from tests.ui.helpers import (
    BACKING,
    LIVE,
    WORKER,
    artifact,
    blob_store,
    claimed,
    complete,
    get,
    make_group,
    resolve,
    upload_log,
)


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """A blob store, for s3 artifacts."""
    return blob_store(tmp_path, clock)


async def test_the_signin_page_says_reading_needs_scopes(api: Api) -> None:
    page = await get(api, "/signin")
    assert "Reading needs no sign-in" not in page.text
    assert "Reading needs the scopes" in page.text


async def test_the_favicon_is_served(api: Api) -> None:
    icon = await api.client.get("/favicon.ico")
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\0\0\1\0"  # an ICO file
    assert '<link rel="icon" href="/favicon.ico"' in (await get(api, "/")).text


async def test_an_empty_open_box_asks_for_an_id_in_words(api: Api) -> None:
    assert 'name="id" size="22" autocomplete="off" spellcheck="false" required>' in (await get(api, "/")).text
    for asked in ("", "   ", "not-an-id"):
        answer = await api.client.get("/find", params={"id": asked}, headers={"accept": "text/html"})
        assert answer.status_code == 400
        assert "[A-Za-z0-9_-]" not in html.unescape(answer.text)  # no regular expression
        assert "22 characters" in answer.text
    empty = await api.client.get("/find", params={"id": ""}, headers={"accept": "text/html"})
    assert "Type a taskId or a taskGroupId" in empty.text


async def test_a_backing_log_not_uploaded_yet_is_not_linked_while_the_run_runs(api: Api) -> None:
    task_id, creds = await claimed(api)
    url = f"/api/queue/v1/task/{task_id}/runs/0/artifacts/{BACKING}"
    # The worker announces the backing log as the commands start, and uploads it when they end.
    await artifact(
        api,
        task_id,
        BACKING,
        {"storageType": "s3", "contentType": "text/plain", "contentEncoding": "gzip"},
        creds,
    )
    running = (await get(api, f"/tasks/{task_id}")).text
    assert f'href="{url}"' not in running
    assert "Not uploaded yet: the worker uploads it when run 0 ends" in running
    await upload_log(api, task_id, b"all done\n", creds)
    await complete(api, task_id, creds)
    done = (await get(api, f"/tasks/{task_id}")).text
    assert f'href="{url}"' in done and "Not uploaded yet" not in done


def _run(run_id: int, at: int, started: int | None, ended: int, state: str) -> dict[str, Any]:
    return {"runId": run_id, "state": state, "times": {"at": at, "from": started, "to": ended}}


def test_a_rerun_tasks_new_run_shows_at_the_end_of_a_long_axis() -> None:
    hour = dates.HOUR
    drawn = task.timeline([_run(0, 0, 1_000, 3_000, "completed"), _run(1, hour, None, hour, "pending")])
    zero, one = drawn["bars"]
    for bar in (zero["wait"], zero["run"], one["wait"]):
        x, width = bar
        assert width >= task.MIN_BAR and x >= task.PLOT_LEFT and x + width <= task.PLOT_RIGHT
    assert one["y"] > zero["y"]


def test_the_axis_has_round_utc_ticks() -> None:
    start = dates.parse_iso("2026-11-29T10:00:07.000Z")
    ticks = task.axis_ticks(start, start + 25 * 60_000)
    assert [label for _, label in ticks] == ["10:05", "10:10", "10:15", "10:20", "10:25"]
    seconds = task.axis_ticks(start, start + 9_000)
    assert seconds[0] == (start + 1_000, "10:00:08") and len(seconds) <= task.MOST_TICKS
    days = task.axis_ticks(start, start + 5 * dates.DAY)
    assert [label for _, label in days][:2] == ["11-30", "12-01"]
    # a rerun 1.6 s after its first run (a browser test once drew one tick for it)
    brief = task.axis_ticks(start + 300, start + 1_900)
    assert [label for _, label in brief] == ["10:00:07.5", "10:00:08.0", "10:00:08.5"]


async def test_the_runs_timeline_has_an_axis_and_shows_a_reruns_run(api: Api) -> None:
    task_id, _ = await api.create_task()
    await claims.claim_task(api.queue, task_id, 0, WORKER, guard=ALLOW_ALL)
    api.clock.advance(2)
    await claims.report(api.queue, task_id, 0, "completed", "completed")
    api.clock.advance(600)  # a rerun ten minutes on: run 0 is 2 s of a 10-minute axis
    rerun = await api.call("POST", f"/task/{task_id}/rerun")
    assert rerun.status_code == 200, rerun.text
    page = (await get(api, f"/tasks/{task_id}")).text
    svg = page[page.index('<svg class="timeline"') : page.index("</svg>")]
    assert ">run 0</text>" in svg and ">run 1</text>" in svg
    assert len(re.findall(r'<text class="tick" x="\d+"', svg)) >= 2 and ">UTC</text>" in svg
    (wait,) = re.findall(r'<rect class="wait" x="(\d+)" y="\d+" width="(\d+)" height="12" data-run="1"', svg)
    assert int(wait[1]) >= task.MIN_BAR and int(wait[0]) + int(wait[1]) <= task.PLOT_RIGHT


async def test_a_task_is_edited_and_recreated_from_its_page(api: Api, root_browser: Browser) -> None:
    payload = {"command": [["/bin/sh", "-c", "echo again"]], "maxRunTime": 60}
    old, _ = await api.create_task(payload=payload, tags={"kind": "build"})
    page = (await get(api, f"/tasks/{old}")).text
    assert f'href="/tasks/create?from={old}"' in page
    form_page = await root_browser.get(f"/tasks/create?from={old}")
    assert form_page.status_code == 200, form_page.text
    new = re.search(r'name="taskId" value="([^"]+)"', form_page.text)[1]  # type: ignore[index]
    assert slugid.is_valid(new) and new != old
    text = html.unescape(re.search(r"<textarea[^>]*>\n?(.*?)</textarea>", form_page.text, re.S)[1])  # type: ignore[index]
    assert f"task {old}" in text and "echo again" in text and "kind: build" in text
    assert "\ncreated:" not in text and "\ndeadline:" not in text and "\nexpires:" not in text
    api.clock.advance(600)
    form = hidden_fields(form_page.text, "/tasks/create")
    edited = text.replace("echo again", "echo edited")
    done = await root_browser.post("/tasks/create", form | {"taskId": new, "definition": edited})
    assert done.status_code == 303, done.text
    made = (await api.call("GET", f"/task/{new}")).json()
    before = (await api.call("GET", f"/task/{old}")).json()
    assert made["payload"]["command"] == [["/bin/sh", "-c", "echo edited"]]
    assert made["tags"] == {"kind": "build"} and made["taskQueueId"] == TASK_QUEUE_ID
    assert made["metadata"] == before["metadata"] and made["taskGroupId"] == before["taskGroupId"]
    assert dates.parse_iso(made["created"]) == api.clock()


async def test_recreating_needs_the_tasks_read_scopes(api: Api, browsers: Any) -> None:
    anonymous = browsers()
    bad = await anonymous.get("/tasks/create?from=nope", headers={"accept": "text/html"})
    assert bad.status_code == 400
    unknown = await anonymous.get(f"/tasks/create?from={slugid.nice()}", headers={"accept": "text/html"})
    assert unknown.status_code == 404
    task_id, _ = await api.create_task()
    shown = await anonymous.get(f"/tasks/create?from={task_id}")
    assert shown.status_code == 200 and "The definition to re-create" in shown.text
    assert f"/signin?next=/tasks/create%3Ffrom%3D{task_id}" in shown.text


async def test_the_apis_page_is_a_page_of_the_ui(api: Api) -> None:
    page = await get(api, "/api")
    assert page.status_code == 200
    assert '<link rel="stylesheet" href="/ui/static/ui.css">' in page.text
    assert '<header class="top">' in page.text and '<a href="/api" aria-current="page">APIs</a>' in page.text
    assert 'href="/api/queue/v1/reference"' in page.text and 'href="/api/auth/v1/openapi.json"' in page.text
    assert "TASKCLUSTER_ROOT_URL=http" in page.text and "taskyard task create task.yml" in page.text
    assert "the queue API's reference" in (await get(api, "/api/")).text


async def test_the_reference_is_readable_entries_not_json_schemas(api: Api) -> None:
    page = await get(api, "/api/queue/v1/reference")
    assert page.status_code == 200
    text = page.text
    assert (
        '<header class="top">' in text and '<link rel="stylesheet" href="/ui/static/reference.css">' in text
    )
    assert '"properties"' not in html.unescape(text) and "&#34;properties&#34;" not in text  # no raw schema
    entry = text[text.index('<section class="op" id="claimWork"') :]
    entry = entry[: entry.index("</section>")]
    assert (
        '<span class="method method-post">POST</span> <code>/api/queue/v1/claim-work/{taskQueueId}</code>'
        in entry
    )
    assert "all of:" in entry and "<code>queue:claim-work:&lt;taskQueueId&gt;</code>" in entry
    body = entry[entry.index("<h3>Body</h3>") : entry.index("<details>")]
    rows = re.findall(
        r'<tr><th scope="row" class="depth-\d"><code>([^<]+)</code></th><td>([^<]*)</td><td>([^<]*)</td>',
        body,
    )
    assert [(name, kind, required) for name, kind, required in rows] == [
        ("workerGroup", "string", "yes"),
        ("workerId", "string", "yes"),
        ("tasks", "integer", ""),
    ]
    assert "1 to 32" in body
    create = text[text.index('<section class="op" id="createTask"') :]
    create = create[: create.index("</section>")]
    assert "<code>metadata.name</code>" in create and "string (date-time)" in create
    assert (
        "for each <code>route</code> in <code>routes</code>: <code>queue:route:&lt;route&gt;</code>" in create
    )
    public = text[text.index('<section class="op" id="ping"') :] if 'id="ping"' in text else ""
    assert not public or "none: anyone may call it." in public[: public.index("</section>")]
    raw = await api.client.get("/api/queue/v1/openapi.json")  # the document itself is unchanged
    assert raw.json()["paths"]["/claim-work/{taskQueueId}"]["post"]["operationId"] == "claimWork"


def _rows_of(page: str) -> list[str]:
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    return re.findall(r'<tr id="t-([\w-]+)"', body)


async def test_the_group_table_sorts_by_name_state_started_and_duration(api: Api) -> None:
    group, (c, a, b, d) = await make_group(api, ["x.charlie", "x.Alpha", "bravo", "x.delta"], retries=0)
    await resolve(api, b, "completed", took=30)
    await resolve(api, c, "failed", took=5)
    await resolve(api, a, "exception", took=60)
    path = f"/groups/{group}"

    async def order(sort: str, **more: str) -> list[str]:
        answer = await api.client.get(path, params={"sort": sort, **more}, headers={"accept": "text/html"})
        assert answer.status_code == 200, answer.text
        return _rows_of(answer.text)

    assert await order("name") == [b, a, c, d]  # ignoring case
    assert await order("-name") == [d, c, a, b]
    assert await order("state") == [d, b, c, a]  # pending, completed, failed, exception
    assert await order("started") == [b, c, a, d]  # never started: last, either way
    assert await order("-started") == [a, c, b, d]
    assert await order("duration") == [c, b, a, d]
    assert await order("-duration") == [a, b, c, d]
    assert await order("-duration", q="X.") == [a, c, d]  # filtered, then sorted (no taskId has a ".")


async def test_the_group_tables_sort_links_keep_the_filter_and_say_the_order(api: Api) -> None:
    group, _ = await make_group(api, ["one", "two"])
    page = (
        await api.client.get(
            f"/groups/{group}",
            params={"state": "pending", "q": "o", "sort": "name"},
            headers={"accept": "text/html"},
        )
    ).text
    head = page[page.index("<thead>") : page.index("</thead>")]
    ascending = '<th scope="col" class="name" aria-sort="ascending">'
    assert ascending + '<a class="sort" href="?state=pending&amp;q=o&amp;sort=-name"' in head
    assert 'aria-sort="none"><a class="sort" href="?state=pending&amp;q=o&amp;sort=duration"' in head
    assert '<input type="hidden" name="sort" value="name">' in page  # the filter form keeps the order
    answer = await api.client.get(
        f"/groups/{group}", params={"sort": "worker"}, headers={"accept": "text/html"}
    )
    assert answer.status_code == 400 and "query parameter sort" in answer.text and "duration" in answer.text


async def test_each_exceptions_reason_is_shown(api: Api) -> None:
    group, (broken, fine) = await make_group(api, ["broken", "fine"], retries=0)
    await resolve(api, broken, "exception")  # worker-shutdown
    page = (await get(api, f"/groups/{group}")).text
    row = re.search(rf'<tr id="t-{broken}".*?</tr>', page, re.S)
    assert row is not None
    assert (
        '<td class="state state-exception">exception <span class="reason">worker-shutdown</span></td>'
        in row[0]
    )
    rows = {r[0]: r for r in (await api.client.get(f"/groups/{group}/rows")).json()["rows"]}
    assert rows[broken][8] == "worker-shutdown" and rows[fine][8] == ""
    assert rows[broken][6].endswith("Z") and isinstance(rows[broken][7], int) and rows[fine][7] is None


async def test_the_log_viewer_numbers_links_and_searches_the_lines(api: Api) -> None:
    task_id, creds = await claimed(api)
    data = b"first\n\x1b[31mred <b>not bold</b>\nthird line\n\nFAILED: the build\n"
    await upload_log(api, task_id, data, creds)
    await complete(api, task_id, creds)
    task_page = (await get(api, f"/tasks/{task_id}")).text
    assert f'href="/tasks/{task_id}/log?run=0"' in task_page
    answer = await get(api, f"/tasks/{task_id}/log")
    assert answer.status_code == 200, answer.text
    page = answer.text
    rows = re.findall(r'<div class="l[^"]*" id="L(\d+)"><a class="n" href="#L(\d+)">(\d+)</a>', page)
    assert rows == [(str(n), str(n), str(n)) for n in range(1, 6)]
    assert '<span class="t"><span class="ansi-fg-1">red &lt;b&gt;not bold&lt;/b&gt;</span></span>' in page
    assert "<b>not bold" not in page
    found = (await get(api, f"/tasks/{task_id}/log?run=0&q=failed")).text
    assert '<div class="l match" id="L5">' in found and '<div class="l" id="L1">' in found
    assert "1 line matches" in found and 'value="failed"' in found
    for bad, status in (("?q=" + "x" * 201, 400), ("?q=%07", 400), ("?run=3", 404), ("?run=x", 400)):
        assert (await get(api, f"/tasks/{task_id}/log{bad}")).status_code == status, bad
    assert (await get(api, f"/tasks/{slugid.nice()}/log")).status_code == 404


async def test_the_log_viewer_numbers_a_long_logs_lines_from_the_whole_log(api: Api) -> None:
    task_id, creds = await claimed(api)
    data = b"".join(b"line %07d %s\n" % (n, b"x" * 26) for n in range(1, 40_001))  # 40 bytes a line
    await upload_log(api, task_id, data, creds)
    await complete(api, task_id, creds)
    page = (await get(api, f"/tasks/{task_id}/log")).text
    numbered = re.findall(r'id="L(\d+)"><a class="n" href="#L\d+">\d+</a><span class="t">line (\d+) ', page)
    assert len(numbered) > 20_000 and numbered[-1] == ("40000", "0040000")
    assert all(int(n) == int(text) for n, text in numbered)  # each number is the line's in the whole log
    assert "bytes of the log are not shown here" in page and "count from the first line shown" not in page


async def test_the_log_viewer_follows_a_running_log(api: Api) -> None:
    task_id, creds = await claimed(api)
    answer = await api.call(
        "POST",
        f"/task/{task_id}/runs/0/live-log/{quote(LIVE, safe='')}",
        {"offset": 0, "data": "one\ntw"},
        creds=creds,
    )
    assert answer.status_code == 200, answer.text
    page = (await get(api, f"/tasks/{task_id}/log")).text
    assert 'data-live="true"' in page and 'data-stream="/' in page and 'data-bytes="6"' in page
    assert 'data-next="3" data-open="true"' in page  # the stream goes on with line 2
    assert 'id="log-follow-box" checked' in page
