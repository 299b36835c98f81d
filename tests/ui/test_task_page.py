"""The task page in process, on both databases: what it shows, what it escapes, what it refuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from taskyard.artifacts.local import LocalStore
from taskyard.model import slugid
from taskyard.ui import task, task_log
from tests.api.conftest import TASK_QUEUE_ID, Api
from tests.conftest import FakeClock
from tests.ui.helpers import BACKING, LIVE, QUEUE, artifact, blob_store, claimed, complete, upload_log

HTML = {"accept": "text/html"}
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock) -> LocalStore:
    return blob_store(tmp_path, clock)


async def page(api: Api, path: str) -> httpx.Response:
    return await api.client.get(path, headers=HTML)


def no_injected_markup(html: str) -> None:
    """Only the page's own tags: nothing a task wrote became a tag or an attribute."""
    assert (
        "<script>alert" not in html
        and "<img" not in html
        and "onerror=alert" not in html.replace("onerror=alert(1)&gt;", "")
    )
    assert 'href="javascript:' not in html
    assert len(re.findall(r"<script\b", html)) == 2  # ui.js and task.js, nothing else


async def test_the_page_shows_the_definition_status_runs_and_group(api: Api) -> None:
    task_id, _ = await api.create_task(tags={"kind": "build"}, retries=3)
    answer = await page(api, f"/tasks/{task_id}")
    assert answer.status_code == 200, answer.text
    html = answer.text
    assert answer.headers["content-security-policy"].startswith("default-src 'self'")
    assert "<h1>api test</h1>" in html
    assert 'class="state state-pending"' in html
    assert f'href="/queues/{TASK_QUEUE_ID}"' in html
    group = re.search(r'href="/groups/([\w-]+)"', html)
    assert group is not None and group[1] == task_id  # a task without a group is its own
    assert "kind: build" in html  # YAML
    assert "&#34;kind&#34;: &#34;build&#34;" in html  # JSON
    assert "No runs yet" not in html and "reasonCreated" not in html
    assert ">scheduled<" in html  # run 0's reasonCreated
    assert "3 of 3" in html  # retries left
    status = await api.client.get(f"/tasks/{task_id}/status")
    assert status.json()["status"]["state"] == "pending"


async def test_html_in_every_task_field_is_escaped(api: Api) -> None:
    metadata = {
        "name": HOSTILE,
        "description": HOSTILE,
        "owner": "a@example.com",
        "source": 'https://example.com/"><script>alert(1)</script>',
    }
    task_id, _ = await api.create_task(metadata=metadata, payload={"command": HOSTILE, "</pre>": HOSTILE})
    html = (await page(api, f"/tasks/{task_id}")).text
    no_injected_markup(html)
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert 'href="https://example.com/&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html


async def test_a_running_log_is_shown_so_far_and_a_resolved_one_whole(api: Api) -> None:
    task_id, creds = await claimed(api)
    text = f"\x1b[31mred\x1b[0m {HOSTILE}\n\x1b[1mbold\x1b[0m \x1b[2Jplain\n"
    answer = await api.call(
        "POST",
        f"/task/{task_id}/runs/0/live-log/{quote(LIVE, safe='')}",
        {"offset": 0, "data": text},
        creds=creds,
    )
    assert answer.status_code == 200, answer.text
    running = (await page(api, f"/tasks/{task_id}")).text
    assert 'data-live="true"' in running
    assert '<span class="ansi-fg-1">red</span>' in running
    assert '<span class="ansi-bold">bold</span> plain' in running
    no_injected_markup(running)
    await upload_log(api, task_id, b"backing \x1b[32mgreen\x1b[0m \xff\xfe end\n", creds)
    await complete(api, task_id, creds)
    done = (await page(api, f"/tasks/{task_id}")).text
    assert 'data-live="false"' in done
    assert re.search(
        r'<rect class="ran ran-completed" x="\d+" y="4" width="\d+" height="12" data-run="0">', done
    )
    assert 'backing <span class="ansi-fg-2">green</span> \ufffd\ufffd end' in done
    assert 'class="state state-completed"' in done
    assert f'href="/api/queue/v1/task/{task_id}/runs/0/artifacts/{BACKING}"' in done
    assert f'href="/api/queue/v1/task/{task_id}/runs/0/artifacts/{LIVE}"' in done


async def test_artifacts_show_whether_they_are_public(api: Api) -> None:
    task_id, creds = await claimed(api)
    await artifact(
        api,
        task_id,
        "private/build.tar",
        {"storageType": "reference", "url": "https://example.com/b", "contentType": "x/y"},
        creds,
    )
    await artifact(
        api,
        task_id,
        "public/oops",
        {"storageType": "error", "reason": "file-missing-on-worker", "message": HOSTILE},
        creds,
    )
    html = (await page(api, f"/tasks/{task_id}")).text
    assert f'href="/api/queue/v1/task/{task_id}/runs/0/artifacts/private/build.tar"' in html
    assert "may need a sign-in or credentials" in html
    assert "file-missing-on-worker" in html
    no_injected_markup(html)


async def test_a_huge_log_shows_its_last_megabyte_and_says_how_much_is_hidden(api: Api) -> None:
    task_id, creds = await claimed(api)
    line = b"0123456789 " * 9 + b"\n"  # 100 bytes
    data = b"the first line\n" + line * 100_000 + b"the last line\n"
    await upload_log(api, task_id, data, creds)
    await complete(api, task_id, creds)
    html = (await page(api, f"/tasks/{task_id}")).text
    assert "the last line" in html and "the first line" not in html
    hidden = re.search(r'id="log-hidden-bytes">(\d+)<', html)
    assert hidden is not None and len(data) - 1024 * 1024 <= int(hidden[1]) < len(data) - 1000 * 1024
    assert len(html) < 1200 * 1024


async def test_relations_are_linked(api: Api) -> None:
    first, _ = await api.create_task()
    second, _ = await api.create_task(
        dependencies=[first],
        metadata={
            "name": "second",
            "description": "d",
            "owner": "o@example.com",
            "source": "https://example.com/s",
        },
    )
    html = (await page(api, f"/tasks/{first}")).text
    assert f'href="/tasks/{second}"' in html  # a dependent
    html = (await page(api, f"/tasks/{second}")).text
    assert f'href="/tasks/{first}"' in html  # a dependency
    assert 'href="https://example.com/s"' in html  # a web source is a link


async def test_an_unscheduled_task_says_whether_it_waits_or_is_blocked(api: Api) -> None:
    first, _ = await api.create_task()
    second, _ = await api.create_task(dependencies=[first])
    lenient, _ = await api.create_task(dependencies=[first], requires="all-resolved")
    html = (await page(api, f"/tasks/{second}")).text
    assert "waits for 1 of its 1 dependencies to complete" in " ".join(html.split())
    claim = await api.call("POST", f"/claim-work/{QUEUE}", {"workerGroup": "wg", "workerId": "w1"})
    assert [c["status"]["taskId"] for c in claim.json()["tasks"]] == [first]  # the others wait on it
    failed = await api.call("POST", f"/task/{first}/runs/0/failed")
    assert failed.status_code == 200, failed.text
    text = " ".join((await page(api, f"/tasks/{second}")).text.split())
    assert "is blocked" in text and "will never run" in text and "deadline-exceeded" in text
    assert f'href="/tasks/{first}"' in text and "failed" in text
    ran = " ".join((await page(api, f"/tasks/{lenient}")).text.split())
    assert "is blocked" not in ran  # all-resolved: a failed dependency lets it run


async def test_unknown_and_malformed_tasks_are_html_error_pages(api: Api) -> None:
    unknown = await page(api, f"/tasks/{slugid.nice()}")
    assert unknown.status_code == 404 and unknown.headers["content-type"].startswith("text/html")
    assert "does not exist" in unknown.text
    for bad in ("nope", "x" * 22, "%3Cscript%3E", "a" * 300):
        answer = await page(api, f"/tasks/{bad}")
        assert answer.status_code in (400, 404), (bad, answer.status_code)
        assert answer.headers["content-type"].startswith("text/html"), bad
        assert "<script>" not in answer.text
    task_id, _ = await api.create_task()
    assert (await page(api, f"/tasks/{task_id}?run=x")).status_code == 400
    assert (await page(api, f"/tasks/{task_id}?run=4")).status_code == 404
    assert (await api.client.get(f"/tasks/{slugid.nice()}/status")).status_code == 404


def test_the_timeline_puts_every_run_on_one_axis() -> None:
    def run(run_id: int, at: int, started: int | None, ended: int, state: str) -> dict[str, Any]:
        return {"runId": run_id, "state": state, "times": {"at": at, "from": started, "to": ended}}

    drawn = task.timeline([run(0, 0, 100, 500, "exception"), run(1, 500, None, 1000, "pending")], width=1000)
    plot = task.PLOT_RIGHT - task.PLOT_LEFT  # 1000 ms across the plot
    left = task.PLOT_LEFT
    assert drawn["bars"] == [
        {
            "runId": 0,
            "state": "exception",
            "y": 4,
            "wait": (left, round(plot / 10)),
            "run": (left + round(plot / 10), round(plot * 0.4)),
        },
        {
            "runId": 1,
            "state": "pending",
            "y": 4 + task.ROW,
            "wait": (left + round(plot / 2), round(plot / 2)),
            "run": None,
        },
    ]


async def test_a_huge_live_log_is_read_from_near_its_end(api: Api) -> None:
    task_id, creds = await claimed(api)
    line = "0123456789 " * 9 + "\n"  # 100 bytes
    offset = 0
    for chunk in ["the first line\n" + line * 9_000, *[line * 9_000] * 3, "\x1b[31mthe last line\x1b[0m\n"]:
        path = f"/task/{task_id}/runs/0/live-log/{quote(LIVE, safe='')}"
        answer = await api.call("POST", path, {"offset": offset, "data": chunk}, creds=creds)
        assert answer.status_code == 200, answer.text
        offset = answer.json()["length"]
    html = (await page(api, f"/tasks/{task_id}")).text
    assert '<span class="ansi-fg-1">the last line</span>' in html and "the first line" not in html
    hidden = re.search(r'id="log-hidden-bytes">(\d+)<', html)
    assert hidden is not None and offset - 1024 * 1024 <= int(hidden[1]) < offset - 1000 * 1024
    assert f'data-bytes="{offset}"' in html


def test_artifact_urls_keep_every_segment_of_a_name() -> None:
    url = task_log.artifact_url("T", 0, "public/./a b/?#/x.log")
    assert url == "/api/queue/v1/task/T/runs/0/artifacts/public/%2E/a%20b/%3F%23/x.log"
    assert task_log.log_name({"payload": {"logs": {"live": "public/../../x"}}}) == task_log.LIVE_LOG
    assert task_log.log_name({"payload": {"logs": {"live": "public/my.log"}}}) == "public/my.log"
    assert task_log.log_name({"payload": []}) == task_log.LIVE_LOG


async def test_a_private_log_shows_only_to_a_viewer_who_may_read_it(api: Api, root_browser: Any) -> None:
    name = "private/logs/live.log"
    task_id, creds = await claimed(api, payload={"logs": {"live": name}})
    path = f"/task/{task_id}/runs/0/live-log/{quote(name, safe='')}"
    answer = await api.call("POST", path, {"offset": 0, "data": "a secret line\n"}, creds=creds)
    assert answer.status_code == 200, answer.text
    anonymous = (await page(api, f"/tasks/{task_id}")).text
    assert "a secret line" not in anonymous and "is not public" in anonymous
    signed_in = (await root_browser.get(f"/tasks/{task_id}", headers=HTML)).text
    assert "a secret line" in signed_in
