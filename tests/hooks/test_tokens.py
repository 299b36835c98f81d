"""Trigger tokens are kept sealed at rest (as secret values are), readable only through the
service, and bound to their hook: a sealed token copied to another hook's row does not open."""

from __future__ import annotations

import pytest

from taskyard.auth.service import Auth
from taskyard.hooks import definitions
from taskyard.hooks.definitions import HookRequest
from taskyard.hooks.service import Hooks
from taskyard.model.errors import AuthenticationFailed, Unavailable
from taskyard.queue.service import Queue
from taskyard.secrets.crypto import Sealer
from taskyard.secrets.service import Secrets

BODY: HookRequest = {
    "metadata": {"name": "n", "description": "d", "owner": "o@example.com"},
    "task": {"taskQueueId": "a/b"},
}


async def test_tokens_are_sealed_at_rest_and_bound_to_their_hook(
    queue: Queue, auth: Auth, secrets: Secrets
) -> None:
    h = Hooks(queue, expand=auth.expand, sealer=secrets.sealer)
    await definitions.create_hook(h, "g", "one", BODY, client_id="test")
    await definitions.create_hook(h, "g", "two", BODY, client_id="test")
    token = (await definitions.get_token(h, "g", "one"))["token"]
    one = await definitions.load(h, "g", "one")
    assert token not in one["trigger_token"]  # sealed, not the token itself
    definitions.check_token(h, one, token)
    with pytest.raises(AuthenticationFailed):
        definitions.check_token(h, one, token + "x")
    new = (await definitions.reset_token(h, "g", "one"))["token"]
    assert new != token and (await definitions.get_token(h, "g", "one"))["token"] == new
    two = await definitions.load(h, "g", "two")
    moved = {**two, "trigger_token": (await definitions.load(h, "g", "one"))["trigger_token"]}
    with pytest.raises(Unavailable):
        definitions.open_token(h, moved)  # type: ignore[arg-type]


async def test_tokens_are_resealed_under_a_new_secret_key(queue: Queue, auth: Auth) -> None:
    old = Hooks(queue, expand=auth.expand, sealer=Sealer.from_secret_keys("the-old-key"))
    for hook in ("one", "two", "three"):
        await definitions.create_hook(old, "g", hook, BODY, client_id="test")
    tokens = {
        hook: (await definitions.get_token(old, "g", hook))["token"] for hook in ("one", "two", "three")
    }
    rotated = Hooks(queue, expand=auth.expand, sealer=Sealer.from_secret_keys("the-new-key", "the-old-key"))
    assert await definitions.reseal_tokens(rotated, batch=2) == 2
    assert await definitions.reseal_tokens(rotated, batch=2) == 1
    assert await definitions.reseal_tokens(rotated) == 0
    new_only = Hooks(queue, expand=auth.expand, sealer=Sealer.from_secret_keys("the-new-key"))
    for hook, token in tokens.items():  # the same tokens, opened without the old key
        assert (await definitions.get_token(new_only, "g", hook))["token"] == token
    assert await definitions.reseal_tokens(new_only) == 0  # no old key: nothing to do
