"""The secrets service's routes in-process (both backends): TaskCluster's answers, its scopes, bad
input answered 400 naming the field, and a value that never shows in an error body or a log."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from taskyard.model import dates
from tests.api.conftest import ROOT, Api, Credentials, assert_error
from tests.api.helpers import create_client
from tests.conftest import FakeClock

PREFIX = "/api/secrets/v1"
MARKER = "value-marker-5d1e0b"  # in the values sent: what no error body, log line or metric may hold


CLIENT_LOGGERS = ("mohawk", "httpx", "httpcore", "taskcluster")  # the test's own client, not the server


def server_log(caplog: pytest.LogCaptureFixture) -> str:
    """What the server logged (down to DEBUG, its database drivers' too): not the test's client."""
    return "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith(CLIENT_LOGGERS))


async def call(api: Api, method: str, path: str, *args: Any, **kwargs: Any) -> httpx.Response:
    """`api.call` below /api/secrets/v1."""
    return await api.call(method, path, *args, prefix=PREFIX, **kwargs)


def secret_path(name: str) -> str:
    return "/secret/" + quote(name, safe="")  # as TaskCluster's clients send it: `/` as %2F


def body(clock: FakeClock, seconds: int = 3600, **value: Any) -> dict[str, Any]:
    return {"secret": value or {"token": MARKER}, "expires": dates.to_iso(clock() + seconds * 1000)}


async def test_set_get_remove_as_taskcluster_answers(api: Api, clock: FakeClock) -> None:
    name = "project/proj/level-3:deploy"
    sent = body(clock)
    set_answer = await call(api, "PUT", secret_path(name), sent)
    assert (set_answer.status_code, set_answer.json()) == (200, {})
    got = await call(api, "GET", secret_path(name))
    assert (got.status_code, got.json()) == (200, sent)
    also = await call(api, "GET", "/secret/project/proj/level-3:deploy")  # an unencoded `/` works too
    assert also.json() == sent
    removed = await call(api, "DELETE", secret_path(name))
    assert (removed.status_code, removed.json()) == (200, {})
    assert_error(await call(api, "GET", secret_path(name)), 404, "ResourceNotFound", names=[repr(name)])
    again = await call(api, "DELETE", secret_path(name))  # removing what isn't there succeeds
    assert (again.status_code, again.json()) == (200, {})


async def test_an_expired_secret_answers_404(api: Api, clock: FakeClock) -> None:
    await call(api, "PUT", secret_path("short"), body(clock, 60))
    clock.advance(61)
    assert_error(await call(api, "GET", secret_path("short")), 404, "ResourceNotFound")
    listed = await call(api, "GET", "/secrets")
    assert "short" not in listed.json()["secrets"]


async def test_list_pages_by_continuation_token(api: Api, clock: FakeClock) -> None:
    names = [f"paged/{i:02}" for i in range(5)]
    for name in reversed(names):
        await call(api, "PUT", secret_path(name), body(clock))
    seen: list[str] = []
    query: dict[str, str] = {"limit": "2"}
    pages = 0
    while True:
        page = (await call(api, "GET", "/secrets", query=query)).json()
        seen += page["secrets"]
        pages += 1
        if "continuationToken" not in page:
            break
        query = {"limit": "2", "continuationToken": page["continuationToken"]}
    assert (seen, pages) == (names, 3)
    bad = await call(api, "GET", "/secrets", query={"continuationToken": "junk!"})
    assert_error(bad, 400, "InputError", names=["continuationToken"])
    assert_error(await call(api, "GET", "/secrets", query={"limit": "x"}), 400, "InvalidRequestArguments")


async def test_each_route_needs_its_scope_and_403_names_it(api: Api, clock: FakeClock) -> None:
    await call(api, "PUT", secret_path("team/a"), body(clock))
    reader = await create_client(api, "reader", "secrets:get:team/*")
    assert (await call(api, "GET", secret_path("team/a"), creds=reader)).status_code == 200
    for method, path, sent, scope in [
        ("GET", secret_path("other/b"), None, "secrets:get:other/b"),
        ("GET", secret_path("missing"), None, "secrets:get:missing"),  # 403 whether or not it exists
        ("PUT", secret_path("team/a"), body(clock), "secrets:set:team/a"),
        ("DELETE", secret_path("team/a"), None, "secrets:set:team/a"),
        ("GET", "/secrets", None, "secrets:list-secrets"),
    ]:
        args = () if sent is None else (sent,)
        refused = await call(api, method, path, *args, creds=reader)
        assert_error(refused, 403, "InsufficientScopes", names=[scope])
    assert (await call(api, "GET", secret_path("team/a"))).json()["secret"] == {"token": MARKER}
    unsigned = await call(api, "GET", secret_path("team/a"), creds=None)
    assert_error(unsigned, 403, "InsufficientScopes", names=["secrets:get:team/a"])


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/secret/", "name"),
        ("/secret/" + "x" * 257, "at most 256 characters"),
        ("/secret/caf%C3%A9", "name"),
        ("/secret/a%09b", "name"),
    ],
)
async def test_a_bad_name_is_a_400_naming_it(api: Api, clock: FakeClock, path: str, rule: str) -> None:
    for method in ("GET", "PUT", "DELETE"):
        args = (body(clock),) if method == "PUT" else ()
        refused = await call(api, method, path, *args)
        assert_error(refused, 400, "InvalidRequestArguments", names=[rule])


@pytest.mark.parametrize(
    ("sent", "code", "names"),
    [
        (
            {"secret": MARKER, "expires": "2999-01-01T00:00:00.000Z"},
            "InputValidationError",
            ["secret", "object"],
        ),
        ({"secret": [MARKER], "expires": "2999-01-01T00:00:00.000Z"}, "InputValidationError", ["secret"]),
        ({"secret": {"k": MARKER}}, "InputValidationError", ["expires"]),
        ({"secret": {"k": MARKER}, "expires": "tomorrow"}, "InputValidationError", ["expires"]),
        ({"secret": {"k": MARKER}, "expires": 5}, "InputValidationError", ["expires"]),
        (
            {"secret": {"k": MARKER}, "expires": "2999-01-01T00:00:00.000Z", "extra": 1},
            "InputValidationError",
            ["extra"],
        ),
        ([MARKER], "InputValidationError", ["body"]),
    ],
)
async def test_a_bad_body_is_a_400_naming_the_field_without_the_value(
    api: Api, caplog: pytest.LogCaptureFixture, sent: Any, code: str, names: list[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    refused = await call(api, "PUT", secret_path("bad"), sent)
    answer = assert_error(refused, 400, code, names=names)
    assert MARKER not in refused.text
    assert answer["requestInfo"]["method"] == "set"
    assert MARKER not in server_log(caplog)
    assert_error(await call(api, "GET", secret_path("bad")), 404, "ResourceNotFound")


async def test_a_body_that_is_no_json_is_a_400_and_not_echoed(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    refused = await call(api, "PUT", secret_path("bad"), raw=b'{"secret": {"k": "' + MARKER.encode() + b'"')
    assert_error(refused, 400, "MalformedPayload")
    assert MARKER not in refused.text and MARKER not in server_log(caplog)


async def test_a_refused_set_shows_the_body_without_its_value(
    api: Api, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader = await create_client(api, "reader", "secrets:get:*")
    refused = await call(api, "PUT", secret_path("mine"), body(clock), creds=reader)
    answer = assert_error(refused, 403, "InsufficientScopes")
    assert answer["requestInfo"]["payload"]["secret"] == "(OMITTED)"
    assert answer["requestInfo"]["payload"]["expires"] == body(clock)["expires"]
    assert MARKER not in refused.text and MARKER not in server_log(caplog)


async def test_a_value_is_never_logged_nor_in_metrics(
    api: Api, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await call(api, "PUT", secret_path("logged?"), body(clock))
    assert (await call(api, "GET", secret_path("logged?"))).status_code == 200
    assert "'logged?'" in server_log(caplog)  # the name is: who set what
    metrics = await api.client.get("/metrics")
    assert metrics.status_code == 200
    assert MARKER not in server_log(caplog) and MARKER not in metrics.text


async def test_ping_and_heartbeats_need_no_credentials(api: Api) -> None:
    ping = await call(api, "GET", "/ping", creds=None)
    assert ping.json()["alive"] is True
    assert (await call(api, "GET", "/__heartbeat__", creds=None)).json() == {}
    assert (await call(api, "GET", "/__lbheartbeat__", creds=None)).json() == {}


async def test_a_secret_key_rotation_is_served(api: Api, clock: FakeClock) -> None:
    """Only the key changes: a value the old key sealed reads the same once the new key and the
    old one serve it."""
    from taskyard.secrets import store
    from taskyard.secrets.service import Secrets

    old = api.services.secrets
    await call(api, "PUT", secret_path("rotated"), body(clock))
    api.services.secrets = Secrets(old.storage, secret_key="a-new-key", clock=clock)
    assert_error(await call(api, "GET", secret_path("rotated")), 503, "ServiceUnavailable", names=["key"])
    api.services.secrets = rotating = Secrets(
        old.storage, secret_key="a-new-key", old_secret_key=old_key(api), clock=clock
    )
    assert (await call(api, "GET", secret_path("rotated"))).json()["secret"] == {"token": MARKER}
    assert await store.reseal(rotating) == 1
    api.services.secrets = Secrets(old.storage, secret_key="a-new-key", clock=clock)
    assert (await call(api, "GET", secret_path("rotated"))).json()["secret"] == {"token": MARKER}


def old_key(api: Api) -> str:
    from tests.conftest import SECRET_KEY

    return SECRET_KEY


_ = (ROOT, Credentials)
