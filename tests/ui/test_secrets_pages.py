"""The secrets pages (`GET /secrets`, `GET /secrets/{name}`): names and expiry for a viewer holding
the list scope, a value only on its own page and only for a viewer holding `secrets:get:<name>`."""

from __future__ import annotations

import html
from collections.abc import Callable
from urllib.parse import quote

from taskyard.model import dates
from taskyard.ui.formats import when
from tests.api.conftest import Api
from tests.ui.conftest import Browser, new_client
from tests.ui.helpers import assert_refused

VALUE = "ui-value-marker-42"


async def set_secret(api: Api, name: str, expires: int) -> None:
    body = {"secret": {"password": VALUE}, "expires": dates.to_iso(expires)}
    answer = await api.call("PUT", "/secret/" + quote(name, safe=""), body, prefix="/api/secrets/v1")
    assert answer.status_code == 200, answer.text


async def test_the_list_shows_names_and_expiry_and_a_value_only_on_its_page(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    expires = api.clock() + dates.DAY
    for name in ("team/a", "team/b:deploy", "other/c"):
        await set_secret(api, name, expires)
    viewer = browsers()
    creds = await new_client(api, "ui-secrets/reader", ["secrets:list-secrets", "secrets:get:team/*"])
    assert (await viewer.signin(creds)).status_code == 303
    listing = await viewer.get("/secrets")
    assert listing.status_code == 200, listing.text
    page = listing.text
    assert VALUE not in page
    for name in ("team/a", "team/b:deploy", "other/c"):
        assert html.escape(name) in page
    assert page.count(html.escape(when(expires))) == 3
    assert page.count("Show value</a>") == 2
    assert f'href="/secrets/{quote("team/b:deploy")}"' in page
    assert "needs <code>secrets:get:other/c</code>" in page
    assert 'href="/secrets"' in page and 'aria-current="page">Secrets' in page  # in the header's nav

    shown = await viewer.get("/secrets/team/b:deploy")
    assert shown.status_code == 200, shown.text
    assert VALUE in shown.text and shown.headers["cache-control"] == "no-store"
    refused = await viewer.get("/secrets/other/c")
    assert_refused(refused, 403, "secrets:get:other/c")
    assert VALUE not in refused.text


async def test_an_anonymous_viewer_is_asked_to_sign_in(api: Api, browsers: Callable[..., Browser]) -> None:
    await set_secret(api, "team/a", api.clock() + dates.DAY)
    anonymous = browsers()
    assert_refused(await anonymous.get("/secrets"), 401, "secrets:list-secrets")
    value_page = await anonymous.get("/secrets/team/a")
    assert_refused(value_page, 401, "secrets:get:team/a")
    assert VALUE not in value_page.text


async def test_a_viewer_who_may_read_but_not_list(api: Api, browsers: Callable[..., Browser]) -> None:
    await set_secret(api, "team/a", api.clock() + dates.DAY)
    viewer = browsers()
    assert (
        await viewer.signin(await new_client(api, "ui-secrets/one", ["secrets:get:team/a"]))
    ).status_code == 303
    assert_refused(await viewer.get("/secrets"), 403, "secrets:list-secrets")
    assert VALUE in (await viewer.get("/secrets/team/a")).text


async def test_expired_secrets_are_not_listed_and_the_list_pages(
    api: Api, browsers: Callable[..., Browser]
) -> None:
    for i in range(205):
        await set_secret(api, f"many/{i:03}", api.clock() + dates.DAY)
    await set_secret(api, "many/expired", api.clock() + 1000)
    api.clock.advance(2)
    viewer = browsers()
    assert (await viewer.signin(await new_client(api, "ui-secrets/all", ["secrets:*"]))).status_code == 303
    first = (await viewer.get("/secrets")).text
    assert first.count("Show value</a>") == 200 and "many/expired" not in first
    token = first.split('rel="next" href="/secrets?continuationToken=')[1].split('"')[0]
    second = (await viewer.get(f"/secrets?continuationToken={html.unescape(token)}")).text
    assert second.count("Show value</a>") == 5 and 'rel="next"' not in second
    bad = await viewer.get("/secrets?continuationToken=nonsense!")
    assert bad.status_code == 400
