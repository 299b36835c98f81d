"""The task page in a real browser: a task followed from pending to completed while its log streams
from a real `taskyard worker`, and a log with colours, invalid UTF-8 and markup rendered safely."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import taskcluster

from taskyard.ui import ansi
from tests.browser.conftest import axe_check
from tests.e2e.conftest import Server
from tests.e2e.helpers import task_queue_id
from tests.e2e.workers import WorkerProcess, create, resolved, sh

WAIT_MS = 60_000  # how long the page may take to show what the worker did (a noisy machine)


@pytest.fixture(scope="module")
def tq() -> str:
    return task_queue_id("task_page")


@pytest.fixture(scope="module")
def worker(site: Server, tq: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    process = WorkerProcess(site, tq, tmp_path_factory.mktemp("work") / "work").start()
    yield process
    process.stop()


def test_a_task_is_followed_from_pending_to_completed_while_its_log_streams(
    page: Any, queue: taskcluster.Queue, site: Server, tmp_path: Path, shot: Any
) -> None:
    tq = task_queue_id("follow")  # its own queue: no worker serves it until the page is open
    worker = WorkerProcess(site, tq, tmp_path / "work")
    try:
        _follow(page, queue, tq, worker, tmp_path, shot)
    finally:
        worker.stop()


def _follow(
    page: Any, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, tmp_path: Path, shot: Any
) -> None:
    go = tmp_path / "go"  # the task prints its lines, then waits for the test to let it finish
    script = (
        "for i in 1 2 3; do printf '\\033[32mline-%s\\033[0m <b>not bold</b>\\n' $i; sleep 0.3; done; "
        f"while [ ! -e {go} ]; do sleep 0.2; done; echo finished"
    )
    task_id = create(queue, tq, {"command": sh(script)}, metadata=_metadata("follow me"))
    page.goto(f"/tasks/{task_id}")
    assert page.locator("#task-state").inner_text() == "pending"
    page.evaluate("window.stillTheSamePage = true")
    worker.start()
    page.wait_for_selector("#log-text:has-text('line-3')", timeout=WAIT_MS)
    assert queue.status(task_id)["status"]["state"] == "running"  # the lines came while it runs
    assert page.locator("#task-state").inner_text() == "running"
    assert page.locator("#log-text span.ansi-fg-2").all_inner_texts()[:3] == ["line-1", "line-2", "line-3"]
    assert page.locator("#log-text b").count() == 0
    shot(page, "task-running")
    go.touch()
    page.wait_for_selector("#task-state.state-completed", timeout=WAIT_MS)
    page.wait_for_selector("#log-text:has-text('finished')", timeout=WAIT_MS)
    assert page.evaluate("window.stillTheSamePage") is True  # no reload
    assert page.locator("#task-runs .state-completed").count() == 1
    assert page.get_by_role("link", name="public/logs/live_backing.log").count() == 1
    shot(page, "task-completed")
    axe_check(page)


def test_a_log_with_colours_invalid_utf8_and_markup_renders_safely(
    page: Any, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, shot: Any
) -> None:
    script = (
        "printf '\\033[1;31mred alert\\033[0m plain \\033[38;5;21mblue\\033[m\\n'; "
        "printf 'bad bytes: \\377\\376 end\\n'; "
        "printf '<script>window.pwned = 1</script>'; "
        "printf '<img src=x onerror=\"window.pwned = 2\">\\033]0;title\\007\\n'"
    )
    task_id = create(queue, tq, {"command": sh(script)}, metadata=_metadata("<i>colours</i>"))
    assert resolved(queue, task_id)["state"] == "completed", worker.log_tail()
    page.goto(f"/tasks/{task_id}")
    log = page.locator("#log-text")
    assert log.locator("span.ansi-fg-1.ansi-bold").inner_text() == "red alert"
    assert log.locator("span.ansi-fg-4").inner_text() == "blue"
    text = log.inner_text()
    assert "bad bytes: \ufffd\ufffd end" in text
    assert '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">\n' in text  # no title
    assert log.locator("script, img").count() == 0
    assert page.evaluate("window.pwned") is None
    assert page.get_by_role("heading", level=1).inner_text() == "<i>colours</i>"
    shot(page, "task-log-colours")
    axe_check(page)


def _metadata(name: str) -> dict[str, str]:
    return {"name": name, "description": "a task of the page's tests", "owner": "ui@example.com",
            "source": "https://example.com/ui"}  # fmt: skip


# Runs in the page: the (text, classes) runs of a <pre> — what a reader sees, however it is split into nodes.
RUNS = """(pre) => {
  const runs = [];
  for (const node of pre.childNodes) {
    const cls = node.nodeType === Node.ELEMENT_NODE ? node.className : "";
    const last = runs[runs.length - 1];
    if (last && last[1] === cls) last[0] += node.textContent; else runs.push([node.textContent, cls]);
  }
  return runs.filter((run) => run[0] !== "");
}"""
CONVERT = f"""([pieces, html]) => {{
  const runs = {RUNS};
  const streamed = document.createElement("pre"), converter = new window.taskyard.AnsiConverter();
  pieces.forEach((piece, i) => streamed.append(...converter.feed(piece, i === pieces.length - 1)));
  const rendered = document.createElement("pre");
  rendered.innerHTML = html;
  return [runs(streamed), runs(rendered)];
}}"""


def test_the_live_converter_in_the_page_renders_as_the_server_does(
    page: Any, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq, {"command": sh("true")}, metadata=_metadata("converter"))
    page.goto(f"/tasks/{task_id}")
    cases = [
        "a \x1b[31mred\x1b[0m b \x1b[1;92mbold green\x1b[m c\n",
        "\x1b[44;4mx\x1b[24my\x1b[49mz\x1b[3;2mw\x1b[22;23mv\x1b[103mq\x1b[39;49mr",
        "\x1b[38;5;196mx\x1b[38;5;2my\x1b[48;2;0;0;230mz\x1b[38;5;232mw\x1b[38;5mv\x1b[0m",
        "\x1b[2J\x1b[?25lclear\x1b]0;title\x07ed\x1b(B \x00\x07\x08bell\x1b[K\x9b\x7f",
        "tab\there\r\nnext\rover\x1b",
        '<script>alert("x")</script> & \x1b[31m<img src=x onerror=alert(1)>\x1b[0m \ufffd',
    ]
    for text in cases:
        for size in (len(text), 1, 3):  # whole, and streamed in pieces that split every sequence
            pieces = [text[i : i + size] for i in range(0, len(text), size)]
            streamed, rendered = page.evaluate(CONVERT, [pieces, str(ansi.to_html(text))])
            assert streamed == rendered, (text, size)


def test_a_big_live_log_shows_its_last_megabyte_and_says_how_much_is_hidden(
    page: Any, queue: taskcluster.Queue, tq: str, worker: WorkerProcess, tmp_path: Path, shot: Any
) -> None:
    go = tmp_path / "go"
    script = (
        "printf 'first-%s\\n' line; head -c 2000000 /dev/zero | tr '\\0' x | fold -w 99; echo; "
        f"printf 'last-%s\\n' before-wait; while [ ! -e {go} ]; do sleep 0.2; done; printf 'after-%s\\n' go"
    )
    task_id = create(queue, tq, {"command": sh(script)}, metadata=_metadata("a big log"))
    streams: list[str] = []
    page.on("request", lambda request: streams.append(request.url) if "/_livelog/" in request.url else None)
    page.goto(f"/tasks/{task_id}")
    page.wait_for_selector("#log-text:has-text('last-before-wait')", timeout=WAIT_MS)
    hidden = int(page.locator("#log-hidden-bytes").inner_text())
    assert page.locator("#log-hidden").is_visible() and hidden > 700_000
    shown = page.evaluate("document.getElementById('log-text').textContent.length")
    assert shown <= 1.3 * 1024 * 1024 and "first-line" not in page.locator("#log-text").inner_text()
    # The server renders the same last megabyte while the run runs. (In the browser the page's
    # script then follows the stream from that megabyte's start, replacing the rendering as the
    # bytes come: right after a reload the text may be part of it.)
    rendered = page.request.get(f"/tasks/{task_id}", headers={"accept": "text/html"}).text()
    assert "last-before-wait" in rendered and "first-line" not in rendered
    page.reload()
    page.wait_for_selector("#log-text:has-text('last-before-wait')", timeout=WAIT_MS)
    assert page.locator("#log-hidden").is_visible()
    # The page asked the stream for its last megabyte only, not for the whole log.
    started = [int(parse_qs(urlsplit(url).query).get("start", ["0"])[0]) for url in streams]
    assert started and started[-1] > 700_000, streams
    go.touch()
    page.wait_for_selector("#task-state.state-completed", timeout=WAIT_MS)
    page.wait_for_selector("#log-text:has-text('after-go')", timeout=WAIT_MS)
    assert page.locator("#log-hidden").is_visible()
    shot(page, "task-big-log", full_page=False)


def test_trimming_the_followed_log_cuts_into_a_big_piece_at_a_line(
    page: Any, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq, {"command": sh("true")}, metadata=_metadata("trim"))
    page.goto(f"/tasks/{task_id}")
    left = page.evaluate(
        """() => {
          const pre = document.createElement("pre"), line = "x".repeat(99) + "\\n";
          pre.append(document.createTextNode(line.repeat(20000)), document.createTextNode("the end\\n"));
          const dropped = window.taskyard.trimLog(pre, 1000050);
          return [dropped, pre.textContent.length, pre.textContent.slice(0, 3), pre.textContent.slice(-8)];
        }"""
    )
    assert left == [1000100, 20000 * 100 + 8 - 1000100, "xxx", "the end\n"]
