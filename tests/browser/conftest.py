"""Browser tests of the web UI: Playwright driving Debian's chromium against a real `taskyard serve`.

`site` is one server per module (SQLite) and `page` a fresh browser page on it; `axe_check(page)`
fails on any serious or critical accessibility violation (axe-core's rules, bundled in
axe-playwright-python); `shot(page, name)` keeps a screenshot in the session's temp directory
(`<pytest tmp>/popen-gw<N>/screenshots/`, N the test process), the pages' record of a CI run.
Without /usr/bin/chromium these tests skip, and fail under CI=true (`.ci/run` installs it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import taskcluster

from tests.conftest import IN_CI
from tests.e2e.conftest import Server, start_server
from tests.ui.conftest import PUBLIC_READS

CHROMIUM = Path(os.environ.get("TASKYARD_CHROMIUM", "/usr/bin/chromium"))
SERIOUS = {"serious", "critical"}


def need_chromium() -> None:
    if not CHROMIUM.exists():
        reason = f"no browser at {CHROMIUM} (apt-get install chromium)"
        if IN_CI:
            pytest.fail(reason + " (CI=true: the browser tests must run)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Chromium for one module: Playwright's sync API holds the thread's event loop while it runs,
    so it must be gone before the async tests of the next directory start."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `taskyard serve` on SQLite for the module's browser tests (it migrates its new database;
    no asyncio here: Playwright's sync API holds the thread's event loop)."""
    data = tmp_path_factory.mktemp("site")
    running = start_server(f"sqlite:///{data / 'taskyard.sqlite3'}", data, name="site")
    make_reads_public(running)
    yield running
    running.stop()


def make_reads_public(server: Server) -> None:
    """The site's web UI made public: its anonymous role grants the queue's read scopes (as
    docs/ui.md tells an operator to)."""
    description = "anyone may read the queue through the web UI"
    server.auth_client().updateRole("anonymous", {"description": description, "scopes": PUBLIC_READS})


@pytest.fixture
def page(browser: object, site: Server) -> Iterator[object]:
    """A fresh page (own cookies) on `site`; relative URLs resolve against it."""
    context = browser.new_context(base_url=site.root_url, viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    opened = context.new_page()
    yield opened
    context.close()


@pytest.fixture
def queue(site: Server) -> taskcluster.Queue:
    """TaskCluster's Queue client on `site`, with root credentials."""
    return site.client()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots", numbered=False)


@pytest.fixture
def shot(screenshots: Path) -> object:
    def take(page: object, name: str, full_page: bool = True) -> Path:
        # full_page=False for a page metres tall (a megabyte of log): rendering all of it into one
        # picture can take longer than Playwright's 30 s on a busy machine, and shows no more.
        path = screenshots / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)  # type: ignore[attr-defined]
        return path

    return take


def axe_check(page: object) -> None:
    """Fail on any serious or critical accessibility violation on `page` as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v.get("impact") in SERIOUS]
    details = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:5]]}" for v in serious
    ]
    assert not serious, "accessibility violations:\n" + "\n".join(details)
