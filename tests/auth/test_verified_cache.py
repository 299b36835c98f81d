"""Temporary credentials are checked once and reused; any change to their issuer or the roles
stops them at once, in this process and (through the change notification) in another."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import mohawk
import pytest

from taskyard.auth import clients, hawk, roles
from taskyard.auth.clients import ClientSpec
from taskyard.auth.service import Auth
from taskyard.model import dates
from taskyard.model.errors import AuthenticationFailed
from taskyard.model.guard import ALLOW_ALL
from tests.auth.helpers import EXPIRES, poll_until

HOUR = 60 * 60 * 1000


def signed(creds: hawk.TemporaryCredentials) -> hawk.Request:
    """A GET signed with temporary credentials, the certificate in `ext` as clients send it."""
    ext = base64.b64encode(json.dumps({"certificate": json.loads(creds["certificate"])}).encode())
    url = "http://testserver/api/queue/v1/ping-signed"
    sender = mohawk.Sender(
        credentials={"id": creds["clientId"], "key": creds["accessToken"], "algorithm": "sha256"},
        url=url,
        method="GET",
        content="",
        content_type="",
        always_hash_content=False,
        ext=ext.decode(),
    )
    return hawk.Request("GET", "/api/queue/v1/ping-signed", "testserver", 80, sender.request_header, b"", "")


async def issue(auth: Auth, client_id: str, token: str, *scopes: str) -> hawk.TemporaryCredentials:
    now = dates.now_ms()
    return hawk.temporary_credentials(client_id, token, list(scopes), now - 1000, now + HOUR)


async def scopes_of(auth: Auth, creds: hawk.TemporaryCredentials) -> tuple[str, ...]:
    who = await auth.authenticate(signed(creds))
    assert who is not None
    return who.scopes


async def refused(auth: Auth, creds: hawk.TemporaryCredentials) -> str:
    with pytest.raises(AuthenticationFailed) as failed:
        await auth.authenticate(signed(creds))
    return str(failed.value)


async def with_issuer(auth: Auth, *scopes: str) -> tuple[str, hawk.TemporaryCredentials]:
    spec = ClientSpec(description="issuer", expires=EXPIRES, scopes=scopes)
    _, token = await clients.create_client(auth, "project/issuer", spec, guard=ALLOW_ALL)
    creds = await issue(auth, "project/issuer", token, "queue:x")
    assert await scopes_of(auth, creds) == ("queue:x",)
    assert await scopes_of(auth, creds) == ("queue:x",)  # the second time from the cache
    assert len(auth.verified) == 1
    return token, creds


Change = Callable[[Auth], Awaitable[Any]]
CHANGES: dict[str, tuple[Change, str]] = {
    "reset": (lambda a: clients.reset_access_token(a, "project/issuer"), "signature is not valid"),
    "disable": (lambda a: clients.disable_client(a, "project/issuer"), "is disabled"),
    "delete": (lambda a: clients.delete_client(a, "project/issuer"), "not found"),
    "update": (
        lambda a: clients.update_client(
            a, "project/issuer", ClientSpec("issuer", EXPIRES, ("queue:y",)), guard=ALLOW_ALL
        ),
        "doesn't satisfy all certificate scopes",
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_a_change_to_the_issuer_stops_its_temporary_credentials_at_once(
    auth: Auth, change: str
) -> None:
    _, creds = await with_issuer(auth, "queue:x")
    make, message = CHANGES[change]
    await make(auth)
    assert message in await refused(auth, creds)


async def test_a_role_taken_away_stops_credentials_it_made_valid(auth: Auth) -> None:
    await roles.create_role(auth, "project-role", "d", ["queue:x"], guard=ALLOW_ALL)
    _, creds = await with_issuer(auth, "assume:project-role")
    await roles.delete_role(auth, "project-role")
    assert "doesn't satisfy all certificate scopes" in await refused(auth, creds)


async def test_another_process_stops_them_when_it_hears_of_the_change(
    auth: Auth,
    other_process: Auth,
) -> None:
    _, creds = await with_issuer(auth, "queue:x")
    assert await scopes_of(other_process, creds) == ("queue:x",)
    assert await scopes_of(other_process, creds) == ("queue:x",)
    await clients.reset_access_token(auth, "project/issuer")

    async def outcome() -> str:
        try:
            await other_process.authenticate(signed(creds))
        except AuthenticationFailed as exc:
            return "refused" if "signature is not valid" in str(exc) else str(exc)
        return "accepted"

    await poll_until(outcome, "refused")
