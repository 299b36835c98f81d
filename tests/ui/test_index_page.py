"""The index pages (`GET /index`, `GET /index/<namespace>`): namespaces and indexed tasks, linked
to the tasks and their artifacts, read with the index's own list scopes."""

from __future__ import annotations

import html

from taskyard.index import entries
from taskyard.model import dates
from taskyard.model.index_paths import Entry
from tests.api.conftest import Api
from tests.ui.conftest import Browser


async def test_the_index_pages_browse_namespaces_and_tasks(api: Api, root_browser: Browser) -> None:
    task_id, _ = await api.create_task()
    until = api.clock() + dates.DAY
    await entries.insert_task(api.services.index, "proj.v1.latest", Entry(task_id, 3, {"k": "v"}, until))
    await entries.insert_task(api.services.index, "proj.v1.nightly.x", Entry(task_id, 0, {}, until))
    top = await root_browser.get("/index")
    assert top.status_code == 200, top.text
    assert 'href="/index/proj"' in top.text and 'aria-current="page">Index<' in top.text
    page = await root_browser.get("/index/proj.v1")
    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert 'href="/index/proj.v1.nightly"' in text and 'href="/index/proj"' in text  # a child, a crumb
    assert "proj.v1.latest" in text and f'href="/tasks/{task_id}"' in text
    assert f'href="/tasks/{task_id}#task-artifacts"' in text and '{"k":"v"}' in text


async def test_the_index_pages_need_the_list_scopes(api: Api, root_browser: Browser) -> None:
    refused = await api.client.get("/index/proj", headers={"accept": "text/html"})
    assert refused.status_code == 401 and "index:list-namespaces:proj" in html.unescape(refused.text)
    bad = await root_browser.get("/index/a..b")
    assert bad.status_code == 400
