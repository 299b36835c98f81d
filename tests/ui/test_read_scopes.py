"""Pages need the API's read scopes: with a new deployment's anonymous role (public artifacts only),
a viewer sees what the API would answer it, and nothing more."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import slugid

from tests.api.conftest import TASK_QUEUE_ID, Api
from tests.ui.conftest import Browser, new_client
from tests.ui.helpers import SECRET, assert_refused, claim

DEFAULT_ANONYMOUS = True  # the anonymous role grants `queue:get-artifact:public/*` alone


async def a_task(api: Api) -> tuple[str, str]:
    """A task (with a secret in its payload) in a group of its own: its taskId and taskGroupId."""
    group = slugid.nice()
    task_id, _ = await api.create_task(taskGroupId=group, payload={"env": {"TOKEN": SECRET}})
    return task_id, group


async def one_pending_one_running(api: Api) -> None:
    """Two tasks in TASK_QUEUE_ID, one of them claimed by worker `busy`."""
    await api.create_task()
    await api.create_task()
    await claim(api, worker="busy")


def task_paths(task_id: str, group: str) -> list[str]:
    return [
        f"/tasks/{task_id}",
        f"/tasks/{task_id}/status",
        f"/tasks/{task_id}/log",
        f"/ui/live/tasks/{task_id}",
    ]


def group_paths(group: str) -> list[str]:
    return [f"/groups/{group}", f"/groups/{group}/graph", f"/groups/{group}/rows", f"/ui/live/groups/{group}"]


async def test_an_anonymous_viewer_is_asked_to_sign_in_for_a_task_and_its_group(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    task_id, group = await a_task(api)
    anonymous = browsers()
    for path in task_paths(task_id, group):
        answer = await anonymous.get(path)
        assert_refused(answer, 401, f"queue:get-task:{task_id}")
        assert f'href="/signin?next={path}"' in answer.text
    for path in group_paths(group):
        assert_refused(await anonymous.get(path), 401, f"queue:list-task-group:{group}")
    # Edit and re-create shows the definition only to a viewer who may read the task.
    assert_refused(await anonymous.get(f"/tasks/create?from={task_id}"), 401, f"queue:get-task:{task_id}")
    hostile = await anonymous.get(f"/tasks/{task_id}", params={"run": "<script>x</script>"})
    assert hostile.status_code == 401 and "<script>x" not in hostile.text
    # The API refuses the same reads to the same caller.
    assert (await api.call("GET", f"/task/{task_id}", creds=None)).status_code == 403
    assert (await api.call("GET", f"/task-group/{group}/list", creds=None)).status_code == 403


async def test_a_client_without_the_scopes_sees_the_refusal_naming_them(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    task_id, group = await a_task(api)
    creds = await new_client(api, "ui-reader/only-status", [f"queue:status:{task_id}"])
    viewer = browsers()
    assert (await viewer.signin(creds)).status_code == 303
    page = await viewer.get(f"/tasks/{task_id}")
    assert_refused(page, 403, f"queue:get-task:{task_id}", "ui-reader/only-status")
    assert_refused(await viewer.get(f"/groups/{group}/rows"), 403, f"queue:list-task-group:{group}")


async def test_a_client_with_the_scopes_sees_the_task_and_group(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    task_id, group = await a_task(api)
    reads = [f"queue:get-task:{task_id}", f"queue:status:{task_id}", f"queue:list-task-group:{group}"]
    viewer = browsers()
    assert (await viewer.signin(await new_client(api, "ui-reader/task", reads))).status_code == 303
    page = await viewer.get(f"/tasks/{task_id}")
    assert page.status_code == 200 and SECRET in page.text
    # Its dependents are not listed without listDependentTasks' scope, which the page names.
    assert f"queue:list-dependent-tasks:{task_id}" in page.text
    assert (await viewer.get(f"/tasks/{task_id}/status")).json()["status"]["taskId"] == task_id
    for path in group_paths(group)[:3]:
        assert (await viewer.get(path)).status_code == 200, path
    rows = (await viewer.get(f"/groups/{group}/rows")).json()["rows"]
    assert len(rows) == 1 and task_id in str(rows[0])


async def test_the_dashboard_hides_the_queues_and_groups_the_viewer_may_not_list(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    _, group = await a_task(api)
    _, other = await a_task(api)
    page = (await browsers().get("/")).text
    assert page.count("Sign in</a> to see the task queues") == 1 and "queue:list-task-queues" in page
    assert TASK_QUEUE_ID not in page and group not in page and other not in page
    assert "2 recent task groups are not shown" in page
    assert "No tasks yet" not in page
    reads = ["queue:list-task-queues", f"queue:list-task-group:{group}"]
    viewer = browsers()
    assert (await viewer.signin(await new_client(api, "ui-reader/dash", reads))).status_code == 303
    page = (await viewer.get("/")).text
    assert f'data-queue="{TASK_QUEUE_ID}"' in page and f"/groups/{group}" in page
    assert other not in page and "1 recent task group is not shown" in page


async def test_a_queue_s_counts_and_workers_need_their_own_scopes_on_the_listings(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    await one_pending_one_running(api)
    counts = f"queue:pending-count:{TASK_QUEUE_ID}"
    lister = browsers()
    assert (
        await lister.signin(await new_client(api, "ui-reader/lister", ["queue:list-task-queues"]))
    ).status_code == 303
    for path in ("/", "/workers"):
        page = (await lister.get(path)).text
        assert TASK_QUEUE_ID in page and html.escape(counts) in page, path
        assert f"queue:list-workers:{TASK_QUEUE_ID}" in page and "busy" not in page, path
    row = re.search(
        rf'<tr data-queue="{re.escape(TASK_QUEUE_ID)}">(.*?)</tr>', (await lister.get("/")).text, re.S
    )
    assert row and 'class="num pending"' not in row[1] and 'class="num workers"' not in row[1]
    assert "No tasks yet" not in (await lister.get("/")).text  # the viewer can't tell
    scopes = [
        "queue:list-task-queues",
        counts,
        f"queue:claimed-count:{TASK_QUEUE_ID}",
        f"queue:list-workers:{TASK_QUEUE_ID}",
    ]
    reader = browsers()
    assert (await reader.signin(await new_client(api, "ui-reader/counter", scopes))).status_code == 303
    row = re.search(
        rf'<tr data-queue="{re.escape(TASK_QUEUE_ID)}">(.*?)</tr>', (await reader.get("/")).text, re.S
    )
    assert (
        row and re.search(r'class="num pending">1<', row[1]) and re.search(r'class="num claimed">1<', row[1])
    )
    assert re.search(r'class="num workers">1<', row[1]) and html.escape(counts) not in row[1]
    assert "busy" in (await reader.get("/workers")).text


async def test_the_workers_and_queue_pages_need_the_queue_and_worker_scopes(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    await one_pending_one_running(api)
    anonymous = browsers()
    assert_refused(await anonymous.get("/workers"), 401, "queue:list-task-queues")
    assert_refused(
        await anonymous.get(f"/queues/{TASK_QUEUE_ID}"), 401, f"queue:get-task-queue:{TASK_QUEUE_ID}"
    )
    lister = browsers()
    creds = await new_client(api, "ui-reader/queues", ["queue:list-task-queues"])
    assert (await lister.signin(creds)).status_code == 303
    listing = await lister.get("/workers")
    assert listing.status_code == 200 and TASK_QUEUE_ID in listing.text
    assert "busy" not in listing.text and f"queue:list-workers:{TASK_QUEUE_ID}" in listing.text
    assert_refused(await lister.get(f"/queues/{TASK_QUEUE_ID}"), 403, f"queue:get-task-queue:{TASK_QUEUE_ID}")
    reader = browsers()
    scopes = [
        f"queue:get-task-queue:{TASK_QUEUE_ID}",
        f"queue:pending-count:{TASK_QUEUE_ID}",
        f"queue:claimed-count:{TASK_QUEUE_ID}",
        f"queue:list-workers:{TASK_QUEUE_ID}",
    ]
    assert (await reader.signin(await new_client(api, "ui-reader/queue", scopes))).status_code == 303
    page = await reader.get(f"/queues/{TASK_QUEUE_ID}")
    assert page.status_code == 200 and 'id="worker-wg-busy"' in page.text
    assert f"queue:pending-list:{TASK_QUEUE_ID}" in page.text  # the pending list is not shown


async def test_the_search_answers_alike_whether_or_not_an_unreadable_id_exists(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    task_id, group = await a_task(api)
    unknown = slugid.nice()
    anonymous = browsers()
    for wanted in (task_id, group, unknown):
        answer = await anonymous.get("/find", params={"id": wanted})
        assert_refused(answer, 401, f"queue:get-task:{wanted}")
    # A viewer who may read the task but not list the group finds the task, and is refused (not
    # told "nothing was found") for the group and for an id that is nothing at all.
    reads = [f"queue:get-task:{task_id}", f"queue:status:{task_id}"]
    viewer = browsers()
    assert (await viewer.signin(await new_client(api, "ui-reader/find", reads))).status_code == 303
    found = await viewer.get("/find", params={"id": task_id})
    assert (found.status_code, found.headers["location"]) == (303, f"/tasks/{task_id}")
    for wanted in (group, unknown):
        answer = await viewer.get("/find", params={"id": wanted})
        assert_refused(answer, 403, f"queue:get-task:{wanted}")
    # With every read scope, an unknown id is plainly not found.
    everything = browsers()
    creds = await new_client(
        api, "ui-reader/find-all", ["queue:get-task:*", "queue:status:*", "queue:list-task-group:*"]
    )
    assert (await everything.signin(creds)).status_code == 303
    assert (await everything.get("/find", params={"id": group})).headers["location"] == f"/groups/{group}"
    missing = await everything.get("/find", params={"id": unknown})
    assert missing.status_code == 404 and "Nothing was found" in missing.text
