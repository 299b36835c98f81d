"""The task-group pages in process, on both databases: the table, its filter without JavaScript,
escaping, the graph page, and bad or unknown ids answered with an HTML page, never a 500."""

from __future__ import annotations

import re

import httpx
import markupsafe
import pytest

from taskyard.model import slugid
from taskyard.queue import tasks
from taskyard.ui import group_rows
from tests.api.conftest import BASE, Api, task_definition
from tests.ui.helpers import make_group, resolve


async def page(api: Api, path: str, **query: str) -> httpx.Response:
    return await api.client.get(BASE + path, params=query, headers={"accept": "text/html"})


def task_ids(html: str) -> list[str]:
    """The taskIds of the table's rows, in order."""
    return re.findall(r'<tr id="t-([^"]+)"', html)


async def test_the_page_lists_the_groups_tasks_with_their_state_runs_and_worker(api: Api) -> None:
    group, (build, test, lint) = await make_group(api, ["build linux", "test linux", "lint"])
    await resolve(api, build, "completed")
    await resolve(api, test, "failed", took=12.5)
    answer = await page(api, f"/groups/{group}")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    html = answer.text
    assert sorted(task_ids(html)) == sorted([build, test, lint])
    assert f'<a href="/tasks/{build}">build linux</a>' in html
    row = re.search(rf'<tr id="t-{test}".*?</tr>', html, re.S)
    assert row is not None
    assert 'class="state state-failed">failed<' in row[0]
    assert ">wg-1/worker-7<" in row[0] and ">12.5 s<" in row[0]
    lint_row = re.search(rf'<tr id="t-{lint}".*?</tr>', html, re.S)
    assert lint_row is not None and ">pending<" in lint_row[0]
    assert 'data-count="completed">1<' in html and 'data-count="failed">1<' in html
    assert 'data-count="pending">1<' in html and 'data-count="all">3<' in html
    assert "Tasks 1 to 3 of 3<" in html
    assert f'href="/groups/{group}/graph"' in html


async def test_state_and_text_filter_without_javascript(api: Api) -> None:
    group, (b1, b2, t1, t2) = await make_group(api, ["Build A", "build B", "test A", "test B"])
    await resolve(api, b1, "failed")
    await resolve(api, t1, "failed")
    failed = await page(api, f"/groups/{group}", state="failed")
    assert sorted(task_ids(failed.text)) == sorted([b1, t1])
    assert "Tasks 1 to 2 of 2 matching the filter (4 in the group)" in failed.text
    assert '<option value="failed" selected>' in failed.text
    both = await page(api, f"/groups/{group}", state="failed", q="build")
    assert task_ids(both.text) == [b1]
    text = await page(api, f"/groups/{group}", q="BUILD")  # ignoring case
    assert sorted(task_ids(text.text)) == sorted([b1, b2])
    assert 'value="BUILD"' in text.text
    by_id = await page(api, f"/groups/{group}", q=t2[3:12])
    assert t2 in task_ids(by_id.text)
    none = await page(api, f"/groups/{group}", q="nothing like it")
    assert task_ids(none.text) == []
    assert "No task of this group matches" in none.text and 'id="no-match" class="muted">' in none.text


async def test_the_table_shows_a_page_of_rows_at_a_time_and_all_of_them_as_json(api: Api) -> None:
    group = slugid.nice()
    items = []
    for i in range(group_rows.PAGE_ROWS + 20):
        body = task_definition(api.clock, taskGroupId=group, metadata=_meta(f"t.{i:04d}"))
        task_id = slugid.nice()
        items.append((task_id, tasks.define(api.queue, task_id, body)))
    async with api.queue.storage.transaction() as tx:
        await tasks.create_tasks_tx(api.queue, tx, items)
    ordered = sorted(task_id for task_id, _ in items)
    first = await page(api, f"/groups/{group}")
    assert task_ids(first.text) == ordered[: group_rows.PAGE_ROWS]
    assert f"Tasks 1 to {group_rows.PAGE_ROWS} of {len(items)}<" in first.text
    assert '<a href="?page=2" rel="next">' in first.text and 'rel="prev"' not in first.text
    second = await page(api, f"/groups/{group}", page="2")
    assert task_ids(second.text) == ordered[group_rows.PAGE_ROWS :]
    assert 'rel="prev"' in second.text and 'rel="next"' not in second.text
    filtered = await page(api, f"/groups/{group}", q="t.00", page="1")  # a "." is in no taskId
    assert len(task_ids(filtered.text)) == 100 and 'id="pager"' not in filtered.text
    rows = await page(api, f"/groups/{group}/rows")
    assert rows.headers["content-type"] == "application/json"
    body = rows.json()
    assert body["taskGroupId"] == group and len(body["rows"]) == len(items)
    assert body["rows"][0] == [
        ordered[0],
        next(f"t.{i:04d}" for i, (t, _) in enumerate(items) if t == ordered[0]),
        "pending",
        1,
        "",
        "",
        "",
        None,
        "",
    ]
    for bad in ("0", "-1", "x", "1e3", "100001"):
        assert (await page(api, f"/groups/{group}", page=bad)).status_code == 400
    assert (await page(api, f"/groups/{slugid.nice()}/rows")).status_code == 404


async def test_html_in_task_names_is_escaped(api: Api) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    group, _ = await make_group(api, [hostile, "fine & dandy"])
    for path in (f"/groups/{group}", f"/groups/{group}/graph"):
        html = (await page(api, path, q="<script>") if path.endswith(group) else await page(api, path)).text
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(" in html
    listed = (await page(api, f"/groups/{group}")).text
    assert "fine &amp; dandy" in listed
    searched = (await page(api, f"/groups/{group}", q='"><script>')).text
    assert '"><script>' not in searched and "&#34;&gt;&lt;script&gt;" in searched


async def test_an_unknown_group_is_a_404_page(api: Api) -> None:
    for path in ("/groups/{}", "/groups/{}/graph"):
        answer = await page(api, path.format(slugid.nice()))
        assert answer.status_code == 404
        assert answer.headers["content-type"].startswith("text/html")
        assert "<h1>Not found</h1>" in answer.text and "does not exist" in answer.text


@pytest.mark.parametrize("bad", ["not-a-slugid", "x" * 300, "%3Cscript%3E", "%00", "..%2F..", "%E2%80%AE"])
async def test_bad_ids_are_a_400_page_never_a_500(api: Api, bad: str) -> None:
    for path in (f"/groups/{bad}", f"/groups/{bad}/graph", f"/groups/{bad}/"):
        answer = await page(api, path)
        assert answer.status_code in (400, 404), (path, answer.status_code)
        assert answer.headers["content-type"].startswith("text/html")
        assert "<script>" not in answer.text


@pytest.mark.parametrize(
    ("query", "named"),
    [({"state": "bogus"}, "state"), ({"q": "x" * 201}, "q"), ({"q": "a\x01b"}, "q")],
)
async def test_a_bad_filter_is_a_400_page_naming_it(api: Api, query: dict[str, str], named: str) -> None:
    group, _ = await make_group(api, ["one"])
    answer = await page(api, f"/groups/{group}", **query)
    assert answer.status_code == 400
    assert f"query parameter {named}" in answer.text


async def test_a_trailing_slash_leads_to_the_group(api: Api) -> None:
    group, _ = await make_group(api, ["one"])
    answer = await page(api, f"/groups/{group}/", state="pending")
    assert answer.status_code == 308
    assert answer.headers["location"] == f"/groups/{group}?state=pending"


async def test_the_page_is_not_live_without_an_event_feed(api: Api) -> None:
    group, _ = await make_group(api, ["one"])
    assert 'data-live=""' in (await page(api, f"/groups/{group}")).text
    answer = await page(api, f"/ui/live/groups/{group}")
    assert answer.status_code == 404 and "no live updates" in answer.text


async def test_the_graph_page_draws_each_task_linked_and_coloured(api: Api) -> None:
    group = slugid.nice()
    outside, _ = await api.create_task(metadata=_meta("elsewhere"))
    root, _ = await api.create_task(taskGroupId=group, metadata=_meta("root"))
    leaf, _ = await api.create_task(taskGroupId=group, metadata=_meta("leaf"), dependencies=[root, outside])
    await resolve(api, root, "completed")
    answer = await page(api, f"/groups/{group}/graph")
    assert answer.status_code == 200
    html = answer.text
    assert "<svg" in html and 'aria-labelledby="graph-title"' in html
    assert f'<a href="/tasks/{root}" class="node s-completed">' in html
    assert f'<a href="/tasks/{leaf}" class="node s-unscheduled">' in html
    assert outside not in html  # a dependency outside the group is not drawn
    edges = html.split('<g class="edges">', 1)[1].split("</g>", 1)[0]
    assert edges.count("<path d=") == 1  # root -> leaf
    assert "2 layers" in html


async def test_a_large_group_is_drawn_collapsed_by_layer_and_state(api: Api) -> None:
    group = slugid.nice()
    roots = [(await api.create_task(taskGroupId=group, metadata=_meta(f"r{i}")))[0] for i in range(3)]
    await resolve(api, roots[0], "completed")
    items = []
    for i in range(300):
        body = task_definition(
            api.clock, taskGroupId=group, metadata=_meta(f"d{i}"), dependencies=[roots[i % 3]]
        )
        task_id = slugid.nice()
        items.append((task_id, tasks.define(api.queue, task_id, body)))
    async with api.queue.storage.transaction() as tx:  # createTask 300 times, in one transaction
        await tasks.create_tasks_tx(api.queue, tx, items)
    html = (await page(api, f"/groups/{group}/graph")).text
    assert "each box stands for the tasks of one state in one" in html
    assert f'href="/groups/{group}?state=completed" class="node s-completed"' in html
    assert ">1 completed<" in html and ">2 pending<" in html  # layer 0
    assert ">100 pending<" in html and ">200 unscheduled<" in html  # layer 1
    assert "2 layers" in html
    assert "/tasks/" not in html.split("<svg", 1)[1]


def _meta(name: str) -> dict[str, str]:
    return {"name": name, "description": "d", "owner": "o@example.com", "source": "https://x"}


def test_the_tables_escape_is_markupsafes() -> None:
    for text in [
        '<script>alert("x")</script>',
        "a & b 'c' \"d\" <e>",
        "&amp; already",
        "plain",
        "",
        "\u202e<>",
    ]:
        assert group_rows.fast_escape(text) == str(markupsafe.escape(text))
