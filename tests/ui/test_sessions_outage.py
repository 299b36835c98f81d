"""The UI's sessions while PostgreSQL is down: a 503 page, never a 500, and the session survives.

On a private cluster (the shared test server is never stopped): `db_url` is overridden so that the
`api` fixture's storage lives there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from taskyard.ui import sessions
from tests.api.conftest import ROOT
from tests.pgcluster import PgCluster
from tests.ui.conftest import Browser

pytestmark = pytest.mark.postgres


@pytest.fixture
def db_url(pg_cluster: PgCluster) -> str:
    return pg_cluster.url()


async def test_a_stopped_database_is_a_503_page_and_the_session_stays(
    browsers: Callable[..., Browser], pg_cluster: PgCluster
) -> None:
    browser = browsers()
    await browser.signin(ROOT)
    await asyncio.to_thread(pg_cluster.stop)
    page = await browser.get("/tasks/create")
    assert page.status_code == 503 and "text/html" in page.headers["content-type"]
    assert sessions.SESSION_COOKIE not in page.headers.get("set-cookie", "")
    action = await browser.post("/signout", {"csrf": "x"})
    assert action.status_code == 503

    await asyncio.to_thread(pg_cluster.start)
    for _ in range(100):  # back as soon as the pool has reconnected
        page = await browser.get("/tasks/create")
        if page.status_code == 200:
            break
        await asyncio.sleep(0.05)
    assert await browser.who() == ROOT.client_id
