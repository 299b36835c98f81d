"""The hooks service over HTTP, driven by TaskCluster's `taskcluster.Hooks`: definitions (created,
read, listed, updated, removed; bad ones refused naming the field), triggers rendering the JSON-e
template in TaskCluster's context, trigger tokens, last fires, the hook's role as the limit of
what its task may do, a schedule that fires, one fire per scheduled time across `kill -9`, and a
binding fired through the in-process bus. On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import Server, start_server
from tests.e2e.helpers import TEMPLATE, definition, grant, hook_body, refused, unique, wait_for


@pytest.fixture(scope="module")
def hooks(server: Server) -> taskcluster.Hooks:
    return taskcluster.Hooks(server.options())


@pytest.fixture(scope="module")
def queue(server: Server) -> taskcluster.Queue:
    return server.client()


def test_create_read_list_update_remove(hooks: taskcluster.Hooks) -> None:
    group, hook = unique(), "nested/hook-1"  # a `/` in the hookId, as taskgraph's action hooks
    body = hook_body("e2e/q", bindings=[])
    created = hooks.createHook(group, hook, body)
    assert created["hookGroupId"] == group and created["hookId"] == hook
    assert created["schedule"] == [] and created["bindings"] == []
    assert created["triggerSchema"] == {"type": "object", "additionalProperties": False}
    assert created["metadata"]["emailOnError"] is True
    assert hooks.hook(group, hook) == created
    assert hooks.createHook(group, hook, body) == created  # the same again: idempotent
    with refused(409, "RequestConflict"):
        hooks.createHook(group, hook, {**body, "schedule": ["0 0 * * *"]})
    assert group in hooks.listHookGroups()["groups"]
    assert [h["hookId"] for h in hooks.listHooks(group)["hooks"]] == [hook]
    bound = [{"exchange": "exchange/taskcluster-queue/v1/task-completed", "routingKeyPattern": "#"}]
    hooks.updateHook(group, hook, {**body, "bindings": bound})
    kept = hooks.updateHook(group, hook, {k: v for k, v in body.items() if k != "bindings"})
    assert kept["bindings"] == bound  # bindings not given are kept
    hooks.removeHook(group, hook)
    with refused(404, "ResourceNotFound"):
        hooks.hook(group, hook)
    with refused(404, "ResourceNotFound"):
        hooks.listHooks(group)
    hooks.removeHook(group, hook)  # already gone: still fine


def test_repeating_a_create_without_bindings_conflicts_as_taskcluster_does(hooks: taskcluster.Hooks) -> None:
    group = unique()
    body = hook_body("e2e/q")
    created = hooks.createHook(group, "h", body)
    assert "bindings" not in created  # the request, with its defaults, as TaskCluster answers
    assert hooks.hook(group, "h")["bindings"] == []  # stored with none
    with refused(409, "RequestConflict"):
        hooks.createHook(group, "h", body)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"schedule": ["61 * * * *"]}, "schedule[0]"),
        ({"schedule": ["* * *"]}, "schedule[0]"),
        ({"triggerSchema": {"type": "nonsense"}}, "triggerSchema"),
        ({"hookGroupId": "other"}, "Hook Group Ids do not match"),
        ({"metadata": {"name": "n", "description": "d"}}, "owner"),
        (
            {
                "bindings": [
                    {"exchange": "exchange/taskcluster-hooks/v1/hook-created", "routingKeyPattern": "#"}
                ]
            },
            "bindings[0]",
        ),
        ({"bindings": [{"exchange": "", "routingKeyPattern": "#"}]}, "exchange"),
        ({"task": []}, "task"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_a_bad_definition_is_a_400_naming_the_field(
    hooks: taskcluster.Hooks, change: dict[str, Any], named: str
) -> None:
    group = unique()
    with refused(400) as info:
        hooks.createHook(group, "h", {**hook_body("e2e/q"), **change})
    assert named in info.value.body["message"]
    hooks.createHook(group, "h", hook_body("e2e/q"))
    with refused(400) as info:
        hooks.updateHook(group, "h", {**hook_body("e2e/q"), **change})
    assert named in info.value.body["message"]


def test_trigger_renders_the_template_in_taskclusters_context(
    server: Server, hooks: taskcluster.Hooks, queue: taskcluster.Queue
) -> None:
    group, hook = unique(), "trig"
    grant(server, group, hook)
    schema = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
    task = {
        "$let": {"taskQueue": "e2e/hooks"},
        "in": {
            **TEMPLATE,
            "tags": {
                "who": "${payload.who}",
                "by": {"$eval": "clientId"},
                "self": {"$eval": "taskId"},
                "at": {"$eval": "now"},
            },
        },
    }
    hooks.createHook(group, hook, {**hook_body("x"), "task": task, "triggerSchema": schema})
    fired = hooks.triggerHook(group, hook, {"who": "alice"})
    task_id = fired["taskId"]
    assert fired["status"] == {"taskId": task_id}
    made = queue.task(task_id)
    assert made["tags"]["who"] == "alice" and made["tags"]["self"] == task_id
    assert made["tags"]["by"] == server.credentials["clientId"]
    assert made["tags"]["at"] == made["created"]
    assert made["taskGroupId"] == task_id and made["payload"] == {"fired": "triggerHook"}
    chosen = taskcluster.slugId()
    assert hooks.triggerHook(group, hook, {"who": "bob", "taskId": chosen})["taskId"] == chosen
    with refused(400, "InputError") as info:
        hooks.triggerHook(group, hook, {"who": 7})
    assert "who" in info.value.body["message"]
    with refused(400, "InputError") as info:
        hooks.triggerHook(group, hook, {"who": "x", "taskId": "not a slug"})
    assert "taskId" in info.value.body["message"]
    fires = hooks.listLastFires(group, hook)["lastFires"]
    assert {f["taskId"] for f in fires} == {task_id, chosen}
    assert all(f["result"] == "success" and f["firedBy"] == "triggerHook" for f in fires)
    assert {f["taskState"] for f in fires} == {"pending"}
    status = hooks.getHookStatus(group, hook)
    assert status["lastFire"]["result"] == "success" and "nextScheduledDate" not in status


def test_a_template_that_renders_nothing_declines(server: Server, hooks: taskcluster.Hooks) -> None:
    group, hook = unique(), "maybe"
    grant(server, group, hook)
    task = {"$if": "payload.go", "then": {"$let": {"taskQueue": "e2e/hooks"}, "in": TEMPLATE}}
    schema = {"type": "object"}
    hooks.createHook(group, hook, {**hook_body("x"), "task": task, "triggerSchema": schema})
    assert hooks.triggerHook(group, hook, {"go": False}) == {}
    with refused(404, "ResourceNotFound"):
        hooks.listLastFires(group, hook)  # a declined fire is not recorded
    assert "taskId" in hooks.triggerHook(group, hook, {"go": True})


def test_the_hooks_role_limits_its_task(
    server: Server, hooks: taskcluster.Hooks, queue: taskcluster.Queue
) -> None:
    group, hook = unique(), "limited"
    grant(server, group, hook)  # may create tasks, but holds no secrets scope
    task = {"$let": {"taskQueue": "e2e/hooks"}, "in": {**TEMPLATE, "scopes": ["secrets:get:prod/deploy-key"]}}
    hooks.createHook(group, hook, {**hook_body("x"), "task": task})
    with refused(403, "InsufficientScopes") as info:
        hooks.triggerHook(group, hook, {})  # the caller (root) holds every scope: the role decides
    assert f"hook-id:{group}/{hook}" in info.value.body["message"]
    (fire,) = hooks.listLastFires(group, hook)["lastFires"]
    assert fire["result"] == "error" and "secrets:get:prod/deploy-key" in fire["error"]
    with refused(404, "ResourceNotFound"):
        queue.task(fire["taskId"])
    assert hooks.getHookStatus(group, hook)["lastFire"]["result"] == "error"


def test_trigger_tokens(server: Server, hooks: taskcluster.Hooks) -> None:
    group, hook = unique(), "tokened"
    grant(server, group, hook)
    hooks.createHook(group, hook, hook_body("e2e/hooks"))
    token = hooks.getTriggerToken(group, hook)["token"]
    anonymous = taskcluster.Hooks({"rootUrl": server.root_url, "maxRetries": 0})
    fired = anonymous.triggerHookWithToken(group, hook, token, {})
    with refused(401, "AuthenticationFailed"):
        anonymous.triggerHookWithToken(group, hook, "wrong" + token, {})
    new = hooks.resetTriggerToken(group, hook)["token"]
    assert new != token
    with refused(401, "AuthenticationFailed"):
        anonymous.triggerHookWithToken(group, hook, token, {})
    anonymous.triggerHookWithToken(group, hook, new, {})
    with refused(404, "ResourceNotFound"):
        anonymous.triggerHookWithToken(group, "nope", new, {})
    fires = hooks.listLastFires(group, hook)["lastFires"]
    assert fired["taskId"] in {f["taskId"] for f in fires}
    assert {f["firedBy"] for f in fires} == {"triggerHookWithToken"}
    with refused(403, "InsufficientScopes"):
        anonymous.getTriggerToken(group, hook)


def test_last_fires_page_newest_first(server: Server, hooks: taskcluster.Hooks) -> None:
    group, hook = unique(), "paged"
    grant(server, group, hook)
    hooks.createHook(group, hook, hook_body("e2e/hooks"))
    fired = [hooks.triggerHook(group, hook, {})["taskId"] for _ in range(5)]
    pages: list[list[str]] = []
    hooks.listLastFires(
        group,
        hook,
        query={"limit": 2},
        paginationHandler=lambda p: pages.append([f["taskId"] for f in p["lastFires"]]),
    )
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sorted(t for p in pages for t in p) == sorted(fired)
    hooks.removeHook(group, hook)
    with refused(404, "ResourceNotFound"):
        hooks.listLastFires(group, hook)  # removed with the hook


def test_a_schedule_fires(server: Server, hooks: taskcluster.Hooks, queue: taskcluster.Queue) -> None:
    group, hook = unique(), "every-second"
    grant(server, group, hook)
    hooks.createHook(group, hook, hook_body("e2e/hooks", schedule=["* * * * * *"]))
    assert "nextScheduledDate" in hooks.getHookStatus(group, hook)

    def scheduled() -> list[dict[str, Any]] | None:
        try:
            fires = hooks.listLastFires(group, hook)["lastFires"]
        except taskcluster.TaskclusterRestFailure:
            return None
        return fires or None

    fire = wait_for(scheduled, what="a scheduled fire", timeout=30)[0]
    hooks.removeHook(group, hook)
    assert fire["firedBy"] == "schedule" and fire["result"] == "success", fire
    made = queue.task(fire["taskId"])
    assert made["payload"] == {"fired": "schedule"}
    assert made["created"] == fire["taskCreateTime"]
    assert made["created"][-5:] == ".000Z"  # the scheduled time itself: a whole second


def test_a_binding_fires_through_the_in_process_bus(
    server: Server, hooks: taskcluster.Hooks, queue: taskcluster.Queue
) -> None:
    group, hook = unique(), "bound"
    grant(server, group, hook)
    route = f"e2e-hooks.{uuid.uuid4().hex[:10]}"
    bindings = [
        {"exchange": "exchange/taskcluster-queue/v1/task-defined", "routingKeyPattern": f"route.{route}"}
    ]
    task = {
        "$let": {"taskQueue": "e2e/hooks"},
        "in": {**TEMPLATE, "tags": {"from": "${payload.status.taskId}"}},
    }
    hooks.createHook(
        group,
        hook,
        {**hook_body("x"), "task": task, "bindings": bindings, "triggerSchema": {"type": "object"}},
    )
    sent: list[str] = []

    def fired() -> list[dict[str, Any]] | None:
        try:
            return hooks.listLastFires(group, hook)["lastFires"]
        except taskcluster.TaskclusterRestFailure:
            task_id = taskcluster.slugId()
            queue.createTask(task_id, _plain_task(route))
            sent.append(task_id)
            return None

    fires = wait_for(fired, what="a fire from a bound event", timeout=30, every=0.5)
    assert fires[0]["firedBy"] == "pulseMessage" and fires[0]["result"] == "success", fires
    assert queue.task(fires[0]["taskId"])["tags"]["from"] in sent


def _plain_task(route: str) -> dict[str, Any]:
    return definition("e2e/plain", routes=[route])


def test_each_scheduled_time_fires_once_across_kill_9(db_url: str, tmp_path: Path) -> None:
    """A server firing a hook every second is killed (SIGKILL) at random moments and started again:
    each scheduled time made one task and one record, never two, and every record's task exists."""
    running = start_server(db_url, tmp_path / "server", name="killed")
    try:
        group, hook = unique(), "tick"
        grant(running, group, hook)
        hooks = taskcluster.Hooks(running.options())
        tq = f"e2e-{uuid.uuid4().hex[:8]}/killed"
        hooks.createHook(group, hook, hook_body(tq, schedule=["* * * * * *"]))
        for _ in range(4):
            time.sleep(random.uniform(0.5, 2.0))
            assert running.process is not None
            os.killpg(running.process.pid, signal.SIGKILL)
            running.process.wait(timeout=10)
            running.start()
        hooks = taskcluster.Hooks(running.options())
        time.sleep(1.5)  # a fire or two after the last start
        hooks.updateHook(group, hook, hook_body(tq))  # no more fires while the test reads
        fires = hooks.listLastFires(group, hook)["lastFires"]
        times = [f["taskCreateTime"] for f in fires]
        assert len(times) == len(set(times)), f"a scheduled time fired twice: {sorted(times)}"
        queue = running.client()
        created = {queue.task(f["taskId"])["created"] for f in fires}
        assert created == set(times)
        pending = queue.pendingTasks(tq)["pendingTasks"]
        assert pending == len(fires)  # no task without its record
    finally:
        running.stop()


def test_a_scheduled_fire_the_queue_refuses_fails_alone(
    server: Server, hooks: taskcluster.Hooks, queue: taskcluster.Queue
) -> None:
    """Two hooks due at the same times, one whose task the queue refuses (a dependency that does
    not exist): its fires are recorded as errors, and the other's still fire."""
    group = unique()
    for hook in ("good", "bad", "limited"):
        grant(server, group, hook)
    every = ["* * * * * *"]
    hooks.createHook(group, "good", hook_body("e2e/hooks", schedule=every))
    missing = taskcluster.slugId()
    bad_task = {"$let": {"taskQueue": "e2e/hooks"}, "in": {**TEMPLATE, "dependencies": [missing]}}
    hooks.createHook(group, "bad", {**hook_body("x", schedule=every), "task": bad_task})
    limited_task = {"$let": {"taskQueue": "e2e/hooks"}, "in": {**TEMPLATE, "scopes": ["secrets:get:nope"]}}
    hooks.createHook(group, "limited", {**hook_body("x", schedule=every), "task": limited_task})

    def fires(hook: str) -> list[dict[str, Any]] | None:
        try:
            return hooks.listLastFires(group, hook)["lastFires"] or None
        except taskcluster.TaskclusterRestFailure:
            return None

    bad = wait_for(lambda: fires("bad"), what="the bad hook's fire", timeout=30)
    limited = wait_for(lambda: fires("limited"), what="the limited hook's fire", timeout=30)
    good = wait_for(lambda: fires("good"), what="the good hook's fire", timeout=30)
    for hook in ("good", "bad", "limited"):
        hooks.removeHook(group, hook)
    assert bad[0]["result"] == "error" and missing in bad[0]["error"], bad[0]
    assert limited[0]["result"] == "error" and "secrets:get:nope" in limited[0]["error"], limited[0]
    assert good[0]["result"] == "success" and queue.task(good[0]["taskId"])["payload"] == {
        "fired": "schedule"
    }


def test_a_template_that_fails_and_a_task_the_queue_refuses_are_400s_recorded(
    server: Server, hooks: taskcluster.Hooks
) -> None:
    group = unique()
    grant(server, group, "broken")
    grant(server, group, "invalid")
    broken = {"$let": {"taskQueue": "e2e/hooks"}, "in": {**TEMPLATE, "tags": {"x": {"$eval": "nosuchname"}}}}
    hooks.createHook(group, "broken", {**hook_body("x"), "task": broken})
    invalid = {"$let": {"taskQueue": "e2e/hooks"}, "in": {**TEMPLATE, "priority": "urgent-ish"}}
    hooks.createHook(group, "invalid", {**hook_body("x"), "task": invalid})
    with refused(400, "InputError") as info:
        hooks.triggerHook(group, "broken", {})
    assert info.value.body["message"].startswith("While firing hook")
    with refused(400, "InputError") as info:
        hooks.triggerHook(group, "invalid", {})
    assert (
        info.value.body["message"].startswith("While calling createTask")
        and "priority" in info.value.body["message"]
    )
    for hook in ("broken", "invalid"):
        (fire,) = hooks.listLastFires(group, hook)["lastFires"]
        assert fire["result"] == "error" and fire["error"], fire
