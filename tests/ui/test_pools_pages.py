"""The worker pools pages: the list (provider, capacity with a local pool's min and max, pending
tasks, workers by state, the newest error) and a pool's page (its workers and recent errors, its
config), read through the API's call pipeline with the worker-manager's scopes: refused without
them, and each part the viewer may not read named by the scope it needs."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from taskyard.model import dates
from taskyard.pools.local import LocalProvider
from tests.api.conftest import Api
from tests.ui.conftest import Browser, new_client
from tests.ui.helpers import assert_refused

WM = "/api/worker-manager/v1"
LOCAL = "ui-pools/local"
STATIC = "ui-pools/static"


def pool_body(provider: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "providerId": provider,
        "description": "the UI test's pool",
        "config": config,
        "owner": "ui@example.com",
        "emailOnError": False,
    }


async def make_pools(api: Api, tmp_path: Path) -> None:
    """A local pool (min 1, max 4) with two pending tasks, and a static pool with three workers (one
    stopped) and an error. No provisioner runs in these tests: the local pool starts no worker."""
    wm = api.services.worker_manager
    wm.providers["local"] = LocalProvider(root_url="http://127.0.0.1:9", data_dir=str(tmp_path))
    made = await api.call(
        "PUT",
        f"{WM}/worker-pool/{quote(LOCAL, safe='')}",
        pool_body("local", {"minCapacity": 1, "maxCapacity": 4}),
        prefix="",
    )
    assert made.status_code == 200, made.text
    for _ in range(2):
        await api.create_task(taskQueueId=LOCAL)
    made = await api.call(
        "PUT", f"{WM}/worker-pool/{quote(STATIC, safe='')}", pool_body("static", {}), prefix=""
    )
    assert made.status_code == 200, made.text
    expires = dates.to_iso(int(api.clock()) + dates.DAY)
    for worker_id in ("m0", "m1", "m2"):
        body = {"expires": expires, "capacity": 2, "providerInfo": {"staticSecret": "s" * 44}}
        made = await api.call(
            "PUT", f"{WM}/workers/{quote(STATIC, safe='')}/rack-1/{worker_id}", body, prefix=""
        )
        assert made.status_code == 200, made.text
    removed = await api.call("DELETE", f"{WM}/workers/{quote(STATIC, safe='')}/rack-1/m2", prefix="")
    assert removed.status_code == 200, removed.text
    report = {
        "workerGroup": "rack-1",
        "workerId": "m0",
        "kind": "boot-failure",
        "title": "disk <full>",
        "description": "no space left on /",
        "extra": {},
    }
    reported = await api.call("POST", f"{WM}/worker-pool-errors/{quote(STATIC, safe='')}", report, prefix="")
    assert reported.status_code == 200, reported.text


def words(page: str) -> str:
    """A page's text: tags dropped (a cell's or an item's end is a space), spaces squeezed."""
    text = re.sub(r"<[^>]+>", "", re.sub(r"</(td|th|li|p|h1|h2)>", " ", page))
    return " ".join(html.unescape(text).split())


def row(page: str, pool_id: str) -> str:
    """The text of the list's row for `pool_id`."""
    found = re.search(rf'<tr>\s*<td><a class="id" href="/pools/{pool_id}">.*?</tr>', page, re.S)
    assert found, page
    return words(found[0])


async def test_the_list_and_a_pool_for_a_viewer_holding_every_scope(
    api: Api, root_browser: Browser, tmp_path: Path
) -> None:
    await make_pools(api, tmp_path)
    page = await root_browser.get("/pools")
    assert page.status_code == 200, page.text
    assert 'aria-current="page">Worker pools' in page.text
    local = row(page.text, LOCAL)
    assert local == f"{LOCAL} local 0 (min 1, max 4) 2 none none", local
    static = row(page.text, STATIC)
    assert static.startswith(f"{STATIC} static 4 0 2 running, 1 stopped "), static
    assert static.endswith("boot-failure: disk <full>"), static
    assert "disk &lt;full&gt;" in page.text  # escaped

    one = await root_browser.get(f"/pools/{STATIC}")
    assert one.status_code == 200, one.text
    text = words(one.text)
    assert "Worker pool ui-pools/static" in text and "the UI test's pool" in text
    assert "Workers 2 running, 1 stopped" in text and "Pending tasks 0" in text
    for worker_id, state in (("m0", "running"), ("m1", "running"), ("m2", "stopped")):
        assert f"rack-1/{worker_id} {state} 2" in text
    assert "boot-failure disk <full> no space left on /" in text
    assert f'href="/queues/{STATIC}"' in one.text
    local_page = await root_browser.get(f"/pools/{LOCAL}")
    text = words(local_page.text)
    assert "Min 1" in text and "Max 4" in text and "Pending tasks 2" in text and "No workers." in text
    assert '"maxCapacity": 4' in html.unescape(local_page.text)


async def test_no_scopes_no_page_and_each_part_names_its_scope(
    api: Api, browsers: Callable[..., Browser], tmp_path: Path
) -> None:
    await make_pools(api, tmp_path)
    anonymous = browsers()
    assert_refused(await anonymous.get("/pools"), 401, "worker-manager:list-worker-pools")
    assert_refused(await anonymous.get(f"/pools/{STATIC}"), 401, f"worker-manager:get-worker-pool:{STATIC}")
    # May list and read the pools, but neither list their workers nor their errors; the queue's
    # counts are public in these tests' deployment (tests/ui/conftest.py).
    viewer = browsers()
    creds = await new_client(
        api, "ui-pools/reader", ["worker-manager:list-worker-pools", "worker-manager:get-worker-pool:*"]
    )
    assert (await viewer.signin(creds)).status_code == 303
    page = await viewer.get("/pools")
    assert page.status_code == 200, page.text
    assert f"needs <code>worker-manager:list-worker-pool-errors:{STATIC}</code>" in page.text
    one = await viewer.get(f"/pools/{STATIC}")
    assert one.status_code == 200, one.text
    assert f"needs <code>worker-manager:list-workers:{STATIC}</code>" in one.text
    assert f"needs <code>worker-manager:list-worker-pool-errors:{STATIC}</code>" in one.text
    assert "rack-1/m0" not in one.text and "disk" not in one.text
    lister = browsers()
    creds = await new_client(api, "ui-pools/lister", ["worker-manager:list-worker-pools"])
    assert (await lister.signin(creds)).status_code == 303
    assert (await lister.get("/pools")).status_code == 200
    assert_refused(await lister.get(f"/pools/{STATIC}"), 403, f"worker-manager:get-worker-pool:{STATIC}")


async def test_an_unknown_pool_is_a_404_page_and_a_bad_id_a_400(api: Api, root_browser: Browser) -> None:
    missing = await root_browser.get("/pools/ui-pools/nowhere")
    assert missing.status_code == 404 and "ui-pools/nowhere" in missing.text
    bad = await root_browser.get("/pools/ui-pools/Not_Valid")
    assert bad.status_code == 400 and "workerPoolId" in bad.text
    empty = await root_browser.get("/pools")
    assert "No worker pools yet" in empty.text


async def test_odd_pool_paths_get_a_4xx_page_never_a_5xx(api: Api, root_browser: Browser) -> None:
    for path in (
        "/pools/a%2Fb/c",
        "/pools/" + "x" * 300 + "/y",
        "/pools/prov/%00",
        "/pools/prov/%C3%A9t%C3%A9",
        "/pools/prov/type/extra",
        "/pools/prov",
    ):
        answer = await root_browser.get(path, headers={"accept": "text/html"})
        assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text[:300])
