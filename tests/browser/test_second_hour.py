"""What a newcomer's second hour with the web UI hit (issue 34), in a real browser against a real
`taskyard serve`: the runs' time axis and a rerun's run, an artifact not uploaded yet, Edit and
re-create, the APIs page and a reference in the UI's style, the favicon and the header's box.
Each page is checked with axe-core's rules."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import taskcluster

from taskyard.model import dates
from tests.browser.conftest import axe_check
from tests.browser.helpers import sign_in
from tests.e2e.conftest import Server
from tests.e2e.helpers import task_queue_id
from tests.e2e.workers import WorkerProcess, create, resolved, running, sh

WORKER = {"workerGroup": "wg", "workerId": "browser"}


def _claimed(queue: taskcluster.Queue, name: str) -> tuple[str, str]:
    """A task created on a queue of its own and claimed as a worker would: (taskId, its queue)."""
    tq = task_queue_id(name)
    task_id = create(queue, tq, {"command": sh("true")}, metadata=_metadata(name))
    claimed = queue.claimWork(tq, {**WORKER, "tasks": 1})["tasks"]
    assert [c["status"]["taskId"] for c in claimed] == [task_id]
    return task_id, tq


def _metadata(name: str) -> dict[str, str]:
    return {"name": name, "description": "d", "owner": "o@example.com", "source": "https://example.com/x"}


def test_the_timeline_has_a_time_axis_and_shows_a_reruns_run(
    page: Any, queue: taskcluster.Queue, shot: Any
) -> None:
    task_id, _ = _claimed(queue, "rerun-me")
    queue.reportCompleted(task_id, "0")
    time.sleep(1.5)  # run 1 begins well after run 0 ended
    queue.rerunTask(task_id)
    page.goto(f"/tasks/{task_id}")
    svg = page.locator("svg.timeline").bounding_box()
    for run in ("0", "1"):
        bar = page.locator(f'svg.timeline rect.wait[data-run="{run}"]').bounding_box()
        assert bar["width"] >= 2 and bar["height"] >= 8, (run, bar)
        assert svg["x"] <= bar["x"] and bar["x"] + bar["width"] <= svg["x"] + svg["width"], (run, bar, svg)
    assert page.locator('svg.timeline rect.ran-completed[data-run="0"]').count() == 1
    ticks = page.locator("svg.timeline text.tick").all_text_contents()
    assert "UTC" in ticks and len(ticks) >= 3
    assert page.locator("svg.timeline text.run-label").all_text_contents() == ["run 0", "run 1"]
    shot(page, "task-rerun-timeline", full_page=False)
    axe_check(page)


def test_an_artifact_not_uploaded_yet_is_not_linked(page: Any, queue: taskcluster.Queue) -> None:
    task_id, _ = _claimed(queue, "uploading")
    name = "public/logs/live_backing.log"
    expires = dates.to_iso(int(time.time() * 1000) + dates.HOUR)
    queue.createArtifact(
        task_id, "0", name, {"storageType": "s3", "contentType": "text/plain", "expires": expires}
    )
    page.goto(f"/tasks/{task_id}")
    artifacts = page.locator("#task-artifacts")
    assert artifacts.get_by_text(name, exact=True).count() == 1
    assert artifacts.get_by_role("link", name=name).count() == 0
    assert "the worker uploads it when run 0 ends" in artifacts.inner_text()
    axe_check(page)


def test_a_task_is_edited_and_recreated_from_its_page(
    page: Any, queue: taskcluster.Queue, site: Server, shot: Any
) -> None:
    tq = task_queue_id("recreate")
    old = create(queue, tq, {"command": sh("echo first")}, metadata=_metadata("first of its name"))
    sign_in(page, site.credentials["clientId"], site.credentials["accessToken"], f"/tasks/{old}")
    with page.expect_navigation():
        page.get_by_role("link", name="Edit and re-create").click()
    assert page.locator("#copied-from").get_by_role("link", name=old).count() == 1
    new = page.get_by_label("taskId").input_value()
    assert new != old and len(new) == 22
    text = page.get_by_label("Task definition (YAML or JSON)").input_value()
    assert "echo first" in text and "deadline:" not in text
    shot(page, "task-recreate")
    axe_check(page)
    edited = text.replace("first of its name", "second of its name").replace("echo first", "echo second")
    page.get_by_label("Task definition (YAML or JSON)").fill(edited)
    with page.expect_navigation():
        page.get_by_role("button", name="Create the task").click()
    assert page.url.endswith(f"/tasks/{new}?done=created")
    assert page.get_by_role("heading", level=1).inner_text() == "second of its name"
    made = queue.task(new)
    assert made["payload"]["command"] == sh("echo second") and made["taskQueueId"] == tq


def test_the_apis_page_and_a_reference_are_pages_of_the_ui(page: Any, shot: Any) -> None:
    page.goto("/api")
    assert (
        page.get_by_role("navigation", name="Main")
        .get_by_role("link", name="APIs")
        .get_attribute("aria-current")
        == "page"
    )
    axe_check(page)
    with page.expect_navigation():
        page.get_by_role("link", name="the queue API's reference").click()
    assert page.get_by_role("heading", level=1).inner_text().startswith("The queue API")
    entry = page.locator("section#claimWork")
    assert entry.locator(".method").inner_text() == "POST"
    assert entry.get_by_role("row", name="workerGroup").count() == 1
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 60_000, height  # was about 97,000 pixels of JSON schemas
    shot(page, "api-reference", full_page=False)
    axe_check(page)


def test_the_favicon_and_the_header_box(page: Any, site: Server) -> None:
    icon = page.request.get("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"
    page.goto("/")
    page.get_by_role("button", name="Open").click()  # empty: the browser asks for an id, no request
    page.wait_for_timeout(300)
    assert page.url.rstrip("/") == site.root_url.rstrip("/")
    assert page.get_by_label("Task or group id").evaluate("e => e.validity.valueMissing") is True
    page.goto("/find?id=")
    assert "Type a taskId or a taskGroupId" in page.locator("main").inner_text()
    axe_check(page)


def test_the_group_table_sorts_in_the_browser_and_keeps_the_order_in_the_url(
    page: Any, queue: taskcluster.Queue, shot: Any
) -> None:
    tq = task_queue_id("sorting")
    group = create(queue, tq, {"command": sh("true")}, metadata=_metadata("b-first"))
    second = create(queue, tq, {"command": sh("true")}, metadata=_metadata("a-second"), taskGroupId=group)
    third = create(queue, tq, {"command": sh("true")}, metadata=_metadata("c-third"), taskGroupId=group)
    claimed = queue.claimWork(tq, {**WORKER, "tasks": 2})["tasks"]
    assert len(claimed) == 2
    for c in claimed:
        task_id = c["status"]["taskId"]
        if task_id == second:
            queue.reportException(task_id, "0", {"reason": "malformed-payload"})
        else:
            queue.reportCompleted(task_id, "0")
    page.goto(f"/groups/{group}")
    page.wait_for_selector("#tasks[data-instant='true']")
    names = page.locator("#tasks tbody td.name")
    row = page.locator(f"#t-{second}")
    assert "malformed-payload" in row.locator("td.state").inner_text()
    page.locator("#tasks thead a.sort[data-sort='name']").click()
    assert names.all_inner_texts() == ["a-second", "b-first", "c-third"]
    assert "sort=name" in page.url
    assert page.locator("#tasks thead th.name").get_attribute("aria-sort") == "ascending"
    page.locator("#tasks thead a.sort[data-sort='name']").click()
    assert names.all_inner_texts() == ["c-third", "b-first", "a-second"]
    assert "sort=-name" in page.url
    page.get_by_label("Name or taskId contains").fill("-")  # every name has one
    page.reload()
    page.wait_for_selector("#tasks[data-instant='true']")
    assert names.all_inner_texts() == ["c-third", "b-first", "a-second"]  # the URL kept the order
    assert page.get_by_label("Name or taskId contains").input_value() == "-"
    assert third in page.locator("#tasks tbody").inner_text()
    assert "malformed-payload" in row.locator("td.state").inner_text()  # drawn by the script too
    shot(page, "group-sorted", full_page=False)
    axe_check(page)


def test_the_log_viewer_numbers_links_searches_and_follows(
    page: Any, queue: taskcluster.Queue, site: Server, tmp_path: Path, shot: Any
) -> None:
    from playwright.sync_api import expect

    tq = task_queue_id("log-viewer")
    go = tmp_path / "go"
    script = (  # the last two lines' words are split in the command, so that its echo holds neither
        "for i in 1 2 3; do printf '\\033[32mline-%s\\033[0m <b>x</b>\\n' $i; done; "
        f"while [ ! -e {go} ]; do sleep 0.2; done; echo ERR''OR: the end; echo fini''shed"
    )
    task_id = create(queue, tq, {"command": sh(script)}, metadata=_metadata("log viewer"))
    worker = WorkerProcess(site, tq, tmp_path / "work").start()
    try:
        running(queue, task_id)
        page.goto(f"/tasks/{task_id}")
        page.wait_for_selector("#log-text:has-text('line-3')", timeout=60_000)
        with page.expect_navigation():
            page.get_by_role("link", name="Open it in the log viewer (line numbers, search, follow)").click()
        lines = page.locator("#log-lines .l")
        expect(lines.filter(has_text="line-3")).to_have_count(1, timeout=30_000)
        assert page.get_by_label("Follow the log").is_checked()
        go.touch()
        expect(lines.locator(".t").get_by_text("finished", exact=True)).to_have_count(1, timeout=60_000)
        texts = lines.locator(".t").all_inner_texts()  # followed, no reload
        numbers = lines.locator(".n").all_inner_texts()
        assert numbers == [str(n) for n in range(1, len(texts) + 1)]
        assert "ERROR: the end" in texts, texts
        assert texts.index("ERROR: the end") + 1 == texts.index("finished")
        assert page.locator("#log-lines b").count() == 0
        page.get_by_role("searchbox", name="Search").fill("error:")
        expect(page.locator("#log-matches")).to_have_text("1 line matches")
        page.get_by_role("searchbox", name="Search").press("Enter")
        error_line = texts.index("ERROR: the end") + 1
        expect(page.locator(f"#L{error_line}")).to_have_class("l match current")
        assert "q=error" in page.url
        shot(page, "log-viewer", full_page=False)
        axe_check(page)
        resolved(queue, task_id)
    finally:
        worker.stop()
    page.goto(f"/tasks/{task_id}/log#L2")  # the uploaded log, a line linked
    assert page.locator("#L2:target").count() == 1
    page.locator("#L3 a.n").click()
    assert page.url.endswith("#L3")
    assert page.locator("#log-lines .t").get_by_text("finished", exact=True).count() == 1
    axe_check(page)
