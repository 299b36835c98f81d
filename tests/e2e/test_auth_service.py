"""The auth service over HTTP, driven by TaskCluster's `taskcluster.Auth`; the queue honours what it makes.

Clients made through the API sign requests to the queue, held to their scopes (directly or through
roles); a reset, disabled or deleted client is refused with 401. Two processes on one PostgreSQL
see each other's changes within seconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import taskcluster
from taskcluster.exceptions import TaskclusterAuthFailure, TaskclusterRestFailure

from tests.e2e.conftest import Server
from tests.e2e.helpers import WORKER, create, definition, iso, now, refused, slug, task_queue_id, wait_for


def unique(name: str) -> str:
    return f"e2e-{uuid.uuid4().hex[:8]}/{name}"


def creates_tasks_in(task_queue: str) -> list[str]:
    """The scopes createTask needs for a default task in `task_queue`."""
    return [
        "queue:create-task:project:none",
        "queue:scheduler-id:-",
        f"queue:create-task:lowest:{task_queue}",
    ]


@pytest.fixture(scope="module")
def auth(server: Server) -> taskcluster.Auth:
    """The root client of the module's server, for the auth service."""
    return server.auth_client()


def make_client(auth: taskcluster.Auth, client_id: str, scopes: list[str]) -> dict[str, str]:
    expires = iso(now() + timedelta(hours=1))
    created = auth.createClient(
        client_id, {"description": "made by e2e", "expires": expires, "scopes": scopes}
    )
    assert created["clientId"] == client_id and len(created["accessToken"]) == 44
    return {"clientId": client_id, "accessToken": created["accessToken"]}


def test_a_client_is_held_to_its_scopes(
    server: Server, auth: taskcluster.Auth, queue: taskcluster.Queue, tq: str
) -> None:
    credentials = make_client(auth, unique("limited"), [*creates_tasks_in(tq), "queue:get-task:*"])
    limited = server.client(credentials)
    task_id = create(limited, tq)
    assert limited.task(task_id)["taskQueueId"] == tq
    assert queue.status(task_id)["status"]["state"] == "pending"
    with refused(403, "InsufficientScopes"):
        limited.createTask(slug(), definition(task_queue_id("elsewhere")))
    with refused(403, "InsufficientScopes"):
        limited.status(task_id)
    with refused(403, "InsufficientScopes"):
        limited.claimWork(tq, {**WORKER, "tasks": 1})
    current = server.auth_client(credentials)
    with refused(
        403, "InsufficientScopes"
    ):  # a new deployment's anonymous role grants no auth:current-scopes
        current.currentScopes()


def test_a_client_cannot_grant_what_it_does_not_hold(server: Server, auth: taskcluster.Auth) -> None:
    owner = unique("owner")
    prefix = owner + "/"
    credentials = make_client(
        auth, owner, [f"auth:create-client:{prefix}*", f"auth:create-role:{prefix}*", "queue:get-task:*"]
    )
    delegate = server.auth_client(credentials)
    make_client(delegate, prefix + "reader", ["queue:get-task:abc"])
    with refused(403, "InsufficientScopes"):
        make_client(delegate, prefix + "writer", ["queue:create-task:*"])
    delegate.createRole(prefix + "role", {"description": "d", "scopes": ["queue:get-task:x"]})
    with refused(403, "InsufficientScopes"):
        delegate.createRole(prefix + "admin", {"description": "d", "scopes": ["*"]})
    assert [c["clientId"] for c in auth.listClients(query={"prefix": prefix})["clients"]] == [
        prefix + "reader"
    ]


def test_roles_grant_scopes_through_assume(server: Server, auth: taskcluster.Auth, tq: str) -> None:
    role_id = unique("creator")
    credentials = make_client(auth, unique("assumer"), [f"assume:{role_id}"])
    assumer = server.client(credentials)
    with refused(403, "InsufficientScopes"):
        create(assumer, tq)
    role = auth.createRole(role_id, {"description": "creates tasks", "scopes": creates_tasks_in(tq)})
    assert role["expandedScopes"] == sorted([f"assume:{role_id}", *creates_tasks_in(tq)])
    assert auth.expandScopes({"scopes": [f"assume:{role_id}"]})["scopes"] == role["expandedScopes"]
    create(assumer, tq)
    auth.deleteRole(role_id)
    with refused(403, "InsufficientScopes"):
        create(assumer, tq)


def test_reset_disable_and_delete_lock_a_client_out(
    server: Server, auth: taskcluster.Auth, queue: taskcluster.Queue, tq: str
) -> None:
    task_id = create(queue, tq)
    client_id = unique("locked")
    old = make_client(auth, client_id, ["queue:get-task:*"])
    assert server.client(old).task(task_id)["taskQueueId"] == tq

    reset = auth.resetAccessToken(client_id)
    new = {"clientId": client_id, "accessToken": reset["accessToken"]}
    with refused(401, "AuthenticationFailed"):
        server.client(old).task(task_id)
    assert server.client(new).task(task_id)["taskQueueId"] == tq
    assert "accessToken" not in auth.client(client_id)

    assert auth.disableClient(client_id)["disabled"] is True
    with refused(401, "AuthenticationFailed"):
        server.client(new).task(task_id)
    auth.enableClient(client_id)
    assert server.client(new).task(task_id)["taskQueueId"] == tq

    auth.deleteClient(client_id)
    auth.deleteClient(client_id)
    with refused(401, "AuthenticationFailed"):
        server.client(new).task(task_id)
    with refused(404, "ResourceNotFound"):
        auth.client(client_id)


def test_roles_and_clients_are_listed(auth: taskcluster.Auth) -> None:
    role_id = unique("listed")
    auth.createRole(role_id, {"description": "d", "scopes": ["queue:get-task:*"]})
    assert role_id in [r["roleId"] for r in auth.listRoles()]
    assert auth.role("anonymous")["scopes"] == ["queue:get-artifact:public/*"]
    pages = auth.listRoles2(query={"limit": 1})
    assert len(pages["roles"]) == 1 and "continuationToken" in pages
    clients = auth.listClients()["clients"]
    assert "static/taskyard/root" in [c["clientId"] for c in clients]
    assert all("accessToken" not in c for c in clients)


# ---------------------------------------------------------------------------------------------------
# Two processes on one PostgreSQL


def created_or_none(queue: taskcluster.Queue, task_queue: str) -> str | None:
    try:
        return create(queue, task_queue)
    except TaskclusterRestFailure as exc:
        if exc.status_code != 403:
            raise
        return None


def refused_with(status: int, call: Callable[[], Any]) -> bool:
    try:
        call()
    except (TaskclusterRestFailure, TaskclusterAuthFailure) as exc:
        return bool(exc.status_code == status)
    return False


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_changes_through_one_process_take_effect_in_the_other(two_servers: tuple[Server, Server]) -> None:
    first, second = two_servers
    task_queue = task_queue_id("cross")
    role_id = unique("cross-role")
    client_id = unique("cross-client")
    credentials = make_client(first.auth_client(), client_id, [f"assume:{role_id}"])
    through_second = second.client(credentials)
    with refused(403, "InsufficientScopes"):  # B now holds the roles, without this one, in its cache
        create(through_second, task_queue)

    first.auth_client().createRole(role_id, {"description": "d", "scopes": creates_tasks_in(task_queue)})
    wait_for(
        lambda: created_or_none(through_second, task_queue), what="B to see the role A created", timeout=10
    )

    second.auth_client().deleteRole(role_id)
    through_first = first.client(credentials)
    wait_for(
        lambda: refused_with(403, lambda: create(through_first, task_queue)),
        what="A to see B delete it",
        timeout=10,
    )

    # B has the client cached: a reset through A revokes the old token there too.
    first.auth_client().resetAccessToken(client_id)
    wait_for(
        lambda: refused_with(401, lambda: create(through_second, task_queue)),
        what="B to see the reset",
        timeout=10,
    )
