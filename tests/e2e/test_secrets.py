"""The secrets service over HTTP, driven by TaskCluster's `taskcluster.Secrets` as a decision task
drives it: set, get, list (paged by the client's own handler), remove; an expired secret is a 404;
each call held to its scope. On SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
import taskcluster

from tests.e2e.conftest import Server
from tests.e2e.helpers import iso, now, refused


def unique(name: str) -> str:
    return f"project/e2e-{uuid.uuid4().hex[:8]}/{name}"


@pytest.fixture(scope="module")
def secrets(server: Server) -> taskcluster.Secrets:
    return taskcluster.Secrets(server.options())


def value(**more: Any) -> dict[str, Any]:
    return {"secret": {"token": "s3cr3t", **more}, "expires": iso(now() + timedelta(hours=1))}


def test_set_get_remove(secrets: taskcluster.Secrets) -> None:
    name = unique("deploy:level-3")  # `/` and `:` in a name, as TaskCluster's conventions have
    sent = value(nested={"a": [1, None, True]})
    assert secrets.set(name, sent) == {}
    got = secrets.get(name)
    assert got["secret"] == sent["secret"]
    assert got["expires"] == sent["expires"]
    assert secrets.remove(name) == {}
    with refused(404, "ResourceNotFound"):
        secrets.get(name)
    assert secrets.remove(name) == {}  # already gone: still succeeds


def test_set_replaces(secrets: taskcluster.Secrets) -> None:
    name = unique("replaced")
    secrets.set(name, value(n=1))
    secrets.set(name, value(n=2))
    assert secrets.get(name)["secret"] == {"token": "s3cr3t", "n": 2}


def test_an_expired_secret_answers_404(secrets: taskcluster.Secrets) -> None:
    name = unique("expired")
    secrets.set(name, {"secret": {"t": 1}, "expires": iso(now() - timedelta(seconds=1))})
    with refused(404, "ResourceNotFound"):
        secrets.get(name)
    assert name not in secrets.list()["secrets"]


def test_list_pages_with_the_clients_handler(secrets: taskcluster.Secrets) -> None:
    prefix = unique("paged")
    names = [f"{prefix}/{i}" for i in range(5)]
    for name in names:
        secrets.set(name, value())
    pages: list[list[str]] = []
    secrets.list(query={"limit": 2}, paginationHandler=lambda page: pages.append(page["secrets"]))
    listed = [name for page in pages for name in page]
    assert [n for n in listed if n.startswith(prefix)] == names
    assert all(len(page) <= 2 for page in pages) and len(pages) >= 3
    assert listed == sorted(listed) and len(set(listed)) == len(listed)


def test_each_call_is_held_to_its_scope(server: Server, secrets: taskcluster.Secrets) -> None:
    name = unique("guarded")
    secrets.set(name, value())
    client_id = f"e2e-{uuid.uuid4().hex[:8]}/reader"
    created = server.auth_client().createClient(
        client_id,
        {
            "description": "reads one secret",
            "expires": iso(now() + timedelta(hours=1)),
            "scopes": [f"secrets:get:{name}"],
        },
    )
    reader = taskcluster.Secrets(
        server.options({"clientId": client_id, "accessToken": created["accessToken"]})
    )
    assert reader.get(name)["secret"] == {"token": "s3cr3t"}
    for attempt, scope in [
        (lambda: reader.get(name + "-other"), f"secrets:get:{name}-other"),
        (lambda: reader.set(name, value()), f"secrets:set:{name}"),
        (lambda: reader.remove(name), f"secrets:set:{name}"),
        (reader.list, "secrets:list-secrets"),
    ]:
        with refused(403, "InsufficientScopes") as info:
            attempt()
        assert scope in info.value.body["message"]


def test_a_bad_body_is_a_400_naming_the_field(secrets: taskcluster.Secrets) -> None:
    with refused(400, "InputValidationError") as info:
        secrets.set(unique("bad"), {"secret": "not an object", "expires": iso(now() + timedelta(hours=1))})
    assert "secret" in info.value.body["message"]
    assert info.value.body["requestInfo"]["payload"]["secret"] == "(OMITTED)"


def test_ping(secrets: taskcluster.Secrets) -> None:
    assert secrets.ping()["alive"] is True
