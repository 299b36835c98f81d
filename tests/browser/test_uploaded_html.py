"""An artifact a task uploaded can't act as the signed-in user who opens it, in a real browser.

The attack: a client holding only create-task and claim-work scopes of one queue creates a task,
claims it, and uploads `public/report.html` whose script reads the create form's CSRF token and
creates a task with `scopes: ["*"]` (whose claim would give the attacker `*` credentials). A root
who is signed in then opens the artifact, from the task page's link or from a link on another
site. The blob is served with `Content-Security-Policy: sandbox` (no script runs) and, HTML being
an active type, `Content-Disposition: attachment` (downloaded, not shown); with `--blob-origin`,
from a host name of its own as well. The script's first statement changes the title, and inline
scripts run before a document's `load`: a title unchanged at `load` means it never ran (the script
sets it to what it did, once done).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import taskcluster

from tests.browser.conftest import make_reads_public
from tests.browser.helpers import sign_in
from tests.e2e.conftest import Server
from tests.e2e.helpers import definition, slug, task_queue_id
from tests.ports import free_port

RAN = "the report's script ran"
NAME = "public/report.html"
SCRIPT_END_MS = 30_000  # how long the script, once it ran, may take to finish (a noisy machine)

REPORT = """<!doctype html>
<html><head><title>report</title><script>
document.title = %(ran)s;
(async () => {
  try {
    const form = await (await fetch("/tasks/create", { credentials: "include" })).text();
    const csrf = form.match(/name="csrf" value="([^"]+)"/)[1];
    const body = new URLSearchParams({ csrf, taskId: %(evil)s, definition: %(definition)s });
    const made = await fetch("/tasks/create", { method: "POST", body, credentials: "include" });
    document.title = "done " + made.status;
  } catch (e) {
    document.title = "failed " + e;
  }
})();
</script></head><body><p>All tests passed.</p></body></html>
"""


@pytest.fixture(scope="module")
def split_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A `taskyard serve` whose artifacts come from an origin of their own: the same port under the
    host name `localhost`, the UI being at 127.0.0.1 (no proxy needed to tell them apart)."""
    data = tmp_path_factory.mktemp("split")
    port = free_port()
    running = Server(
        name="split",
        db_url=f"sqlite:///{data / 'taskyard.sqlite3'}",
        data_dir=data,
        access_token=taskcluster.slugId() + taskcluster.slugId(),
        claim_timeout=60,
        claim_work_timeout=2.0,
        resolver_interval=0.2,
        deadline_delay=0.0,
        port=port,
        extra_args=["--blob-origin", f"http://localhost:{port}"],
    ).start()
    make_reads_public(running)
    yield running
    running.stop()


def attacker(server: Server, tq: str) -> dict[str, str]:
    """A client that may create tasks in `tq` and claim them, and nothing else."""
    scopes = [
        f"queue:create-task:lowest:{tq}",
        "queue:create-task:project:none",
        "queue:scheduler-id:-",
        f"queue:claim-work:{tq}",
        "queue:worker-id:evil/*",
    ]
    made = server.auth_client().createClient(
        f"attacker-{slug()}",
        {"expires": taskcluster.fromNowJSON("1 hour"), "description": "uploads a report", "scopes": scopes},
    )
    return {"clientId": made["clientId"], "accessToken": made["accessToken"]}


def upload_report(server: Server, evil_task_id: str) -> str:
    """As the attacker: create and claim a task, upload the report. Answers the task's id."""
    tq = task_queue_id("uploaded_html")
    queue = server.client(attacker(server, tq))
    task_id = slug()
    queue.createTask(task_id, definition(tq))
    claimed = queue.claimWork(tq, {"workerGroup": "evil", "workerId": "w1", "tasks": 1})
    (claim,) = claimed["tasks"]
    as_task = server.client(claim["credentials"])
    wanted = definition(tq, scopes=["*"], metadata={**definition(tq)["metadata"], "name": "root's"})
    for dated in ("created", "deadline"):
        del wanted[dated]  # the form fills them in
    report = REPORT % {
        "ran": json.dumps(RAN),
        "evil": json.dumps(evil_task_id),
        "definition": json.dumps(json.dumps(wanted)),
    }
    made = as_task.createArtifact(
        task_id,
        0,
        NAME,
        {"storageType": "s3", "contentType": "text/html", "expires": taskcluster.fromNowJSON("1 hour")},
    )
    headers = {"content-type": "text/html"}
    sent = requests.put(made["putUrl"], data=report.encode(), headers=headers, timeout=30)
    assert sent.status_code == 200, sent.text
    return task_id


def opened(page: Any, go: Any) -> str:
    """Open the artifact with `go()`; answer the title of the document the page then shows, if it
    is the artifact ('' if the browser downloaded it instead). When the script ran, wait for it
    to finish first."""
    try:
        go()
        page.wait_for_load_state("load")
    except Exception as exc:  # Playwright's goto raises when the answer is a download
        if "Download is starting" not in str(exc):
            raise
        return ""
    if "/_blobs/" not in page.url:
        return ""  # the click downloaded it: the task page stays
    title = str(page.title())
    if title == RAN:
        page.wait_for_function("!document.title.startsWith('the report')", timeout=SCRIPT_END_MS)
    return str(page.title())


def check_the_exploit_fails(browser: Any, server: Server, tmp_path: Path, blob_origin: str) -> None:
    evil_task_id = slug()
    task_id = upload_report(server, evil_task_id)
    context = browser.new_context(base_url=server.root_url, accept_downloads=True)
    try:
        page = context.new_page()
        sign_in(page, server.credentials["clientId"], server.credentials["accessToken"])
        downloads: list[Any] = []
        page.on("download", lambda download: downloads.append(download))

        # From the task page's link, as the root would open it.
        page.goto(f"/tasks/{task_id}")
        link = page.get_by_role("link", name=NAME)
        assert link.count() == 1
        from_task_page = opened(page, lambda: link.click())

        # From a link on another site: the signed URL the task page's link redirects to.
        signed = server.client().buildSignedUrl("getArtifact", task_id, 0, NAME)
        location = requests.get(signed, allow_redirects=False, timeout=30).headers["location"]
        assert location.startswith(f"{blob_origin}/api/queue/v1/_blobs/{task_id}/0/")
        page.goto(f"/tasks/{task_id}")
        from_elsewhere = opened(page, lambda: page.goto(location))

        for kept in downloads:  # the browser did download it, and the bytes are the report's
            kept.save_as(tmp_path / "report.html")
            assert "All tests passed." in (tmp_path / "report.html").read_text()
    finally:
        context.close()

    with pytest.raises(taskcluster.exceptions.TaskclusterRestFailure) as missing:
        server.client().task(evil_task_id)
    assert missing.value.status_code == 404, f"the report's script created {evil_task_id}"
    for title in (from_task_page, from_elsewhere):
        assert title in ("", "report"), f"the report's script ran: {title}"


def test_uploaded_html_runs_no_script_as_the_signed_in_root(
    browser: Any, site: Server, tmp_path: Path
) -> None:
    check_the_exploit_fails(browser, site, tmp_path, site.root_url)


def test_uploaded_html_runs_no_script_from_the_blob_origin_either(
    browser: Any, split_site: Server, tmp_path: Path
) -> None:
    check_the_exploit_fails(browser, split_site, tmp_path, f"http://localhost:{split_site.port}")
