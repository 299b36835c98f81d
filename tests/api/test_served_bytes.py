"""Uploaded bytes as a browser gets them: the headers of blobs and live logs (no script runs, active
types are attachments), and a deployment's blob origin, which serves them and nothing else."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from taskyard.api.app import Services, build_app
from taskyard.artifacts.local import LocalStore
from taskyard.auth.service import Auth
from taskyard.cli import options
from taskyard.config import ServerConfig
from taskyard.model.errors import ConfigError
from taskyard.queue import livelogs
from taskyard.queue.service import Queue
from taskyard.scheduler.service import Scheduler
from taskyard.secrets.service import Secrets
from taskyard.ui.app import Pages
from tests.api.artifact_helpers import create, put, running_task
from tests.api.conftest import BASE, Api, assert_error
from tests.api.helpers import NAME as LOG_NAME
from tests.api.helpers import append
from tests.conftest import SECRET_KEY, FakeClock
from tests.ui.conftest import make_reads_public

BLOB_ORIGIN = "http://artifacts.test"
PAGE = b"<html><script>document.title = 'ran'</script></html>"


@pytest.fixture(params=["root", "blob origin"])
def origin(request: pytest.FixtureRequest) -> str:
    """Where the deployment serves blobs and live logs: its root URL, or an origin of their own."""
    return BASE if request.param == "root" else BLOB_ORIGIN


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock, origin: str) -> LocalStore:
    return LocalStore(str(tmp_path / "blobs"), origin, SECRET_KEY, max_bytes=10_000, clock=clock)


@pytest.fixture
def live_log_urls(origin: str) -> livelogs.StreamUrls:
    return livelogs.StreamUrls(origin, SECRET_KEY)


@pytest.fixture
def services(queue: Queue, auth: Auth, secrets: Secrets, origin: str) -> Services:
    return Services(
        queue=queue,
        auth=auth,
        scheduler=Scheduler(queue, expand=auth.expand),
        secrets=secrets,
        root_url=BASE,
        blob_origin=None if origin == BASE else origin,
    )


@pytest.fixture
async def api(services: Services, clock: FakeClock) -> AsyncIterator[Api]:
    """The app as `taskyard serve` builds it, web UI included: the blob origin must refuse its pages."""
    transport = httpx.ASGITransport(app=build_app(services, Pages(services)), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield Api(client, services, clock)


async def uploaded(api: Api, content_type: str, data: bytes = PAGE) -> tuple[str, str]:
    """A running task's `public/x` of `content_type`: answers the task and the blob's URL."""
    task_id, _ = await running_task(api)
    made = await create(api, task_id, "public/x", {"storageType": "s3", "contentType": content_type})
    assert made.status_code == 200, made.text
    sent = await put(api, made.json()["putUrl"], data, content_type)
    assert sent.status_code == 200, sent.text
    redirect = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/public/x", creds=None)
    assert redirect.status_code == 303, redirect.text
    return task_id, str(redirect.headers["location"])


def assert_sandboxed(response: httpx.Response) -> None:
    assert response.headers["x-content-type-options"] == "nosniff"
    policy = [part.strip() for part in response.headers["content-security-policy"].split(";")]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert response.headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize(
    "content_type",
    ["text/html", "Text/HTML; charset=utf-8", "image/svg+xml", "application/xhtml+xml", "text/xml",
     "application/javascript", "text/plain, text/html"],
)  # fmt: skip
async def test_an_active_type_is_a_sandboxed_attachment(api: Api, origin: str, content_type: str) -> None:
    _, url = await uploaded(api, content_type)
    assert url.startswith(f"{origin}/api/queue/v1/_blobs/")
    for method in ("GET", "HEAD"):
        blob = await api.client.request(method, url)
        assert blob.status_code == 200, blob.text
        assert blob.headers["content-type"] == content_type  # as uploaded: a download keeps it
        assert blob.headers["content-disposition"] == "attachment"
        assert_sandboxed(blob)
    assert (await api.client.get(url)).content == PAGE


@pytest.mark.parametrize("content_type", ["text/plain", "image/png", "application/json"])
async def test_a_plain_type_is_shown_sandboxed(api: Api, content_type: str) -> None:
    _, url = await uploaded(api, content_type, b"plain")
    blob = await api.client.get(url)
    assert blob.status_code == 200 and blob.content == b"plain"
    assert blob.headers["content-type"] == content_type
    assert "content-disposition" not in blob.headers
    assert_sandboxed(blob)
    ranged = await api.client.get(url, headers={"range": "bytes=1-2"})
    assert ranged.status_code == 206 and ranged.content == b"la"
    assert_sandboxed(ranged)


async def test_a_live_log_is_served_sandboxed(api: Api, origin: str) -> None:
    task_id, creds = await running_task(api)
    appended = await append(api, task_id, creds, {"offset": 0, "data": "<script>alert(1)</script>\n"})
    assert appended.status_code == 200, appended.text
    url = appended.json()["url"]
    assert url.startswith(f"{origin}/api/queue/v1/_livelog/{task_id}/0?")
    stream = await api.client.get(url + "&follow=0")
    assert stream.status_code == 200
    assert stream.headers["content-type"] == "text/plain; charset=utf-8"
    assert "content-disposition" not in stream.headers
    assert_sandboxed(stream)
    redirect = await api.call("GET", f"/task/{task_id}/runs/0/artifacts/{LOG_NAME}", creds=None)
    assert redirect.headers["location"] == url


@pytest.mark.parametrize("origin", [BLOB_ORIGIN])
async def test_the_blob_origin_serves_blobs_and_live_logs_only(api: Api, origin: str) -> None:
    task_id, url = await uploaded(api, "text/plain", b"plain")
    path = url[len(BLOB_ORIGIN) :]
    assert (await api.client.get(url)).content == b"plain"
    with_port = await api.client.get(url, headers={"host": "Artifacts.Test:8443"})
    assert with_port.status_code == 200, with_port.text
    # The UI's host serves no blob, signed or not.
    on_main = await api.client.get(BASE + path)
    assert_error(on_main, 404, "ResourceNotFound", names=["blob origin"])
    put_on_main = await api.client.put(BASE + path, content=b"x", headers={"content-type": "text/plain"})
    assert_error(put_on_main, 404, "ResourceNotFound", names=["blob origin"])
    # The blob origin's host serves no API call and no page of the UI.
    for elsewhere in ("/", "/tasks/create", f"/tasks/{task_id}", "/api/queue/v1/ping", "/api", "/metrics",
                      f"/api/queue/v1/task/{task_id}", "/signin"):  # fmt: skip
        refused = await api.client.get(BLOB_ORIGIN + elsewhere, headers={"accept": "text/html"})
        assert_error(refused, 404, "ResourceNotFound", names=["artifacts and live logs only"])
    posted = await api.client.post(BLOB_ORIGIN + "/tasks/create", data={"csrf": "x", "definition": "{}"})
    assert_error(posted, 404, "ResourceNotFound", names=["artifacts and live logs only"])
    assert (await api.client.get(BASE + "/api/queue/v1/ping")).status_code == 200
    # Live logs: on the blob origin, and on the UI's host too (the task page follows them there).
    log_task, creds = await running_task(api)
    appended = await append(api, log_task, creds, {"offset": 0, "data": "hello\n"})
    log_url = appended.json()["url"]
    assert log_url.startswith(BLOB_ORIGIN + "/api/queue/v1/_livelog/")
    for each in (log_url, BASE + log_url[len(BLOB_ORIGIN) :]):
        stream = await api.client.get(each + "&follow=0")
        assert stream.status_code == 200 and stream.text == "hello\n"
        assert_sandboxed(stream)


async def test_the_ui_follows_a_live_log_from_the_blob_origin_on_its_own_host(api: Api, origin: str) -> None:
    await make_reads_public(api)
    task_id, creds = await running_task(api)
    assert (await append(api, task_id, creds, {"offset": 0, "data": "line one\n"})).status_code == 200
    page = await api.client.get(f"{BASE}/tasks/{task_id}", headers={"accept": "text/html"})
    assert page.status_code == 200
    stream_path = f'data-stream="/api/queue/v1/_livelog/{task_id}/0?'
    assert stream_path in page.text.replace("&amp;", "&")


def server_config(tmp_path: Path, argv: list[str], environ: dict[str, str] | None = None) -> ServerConfig:
    parser = argparse.ArgumentParser()
    options.add_server_options(parser)
    environ = {"TASKYARD_DATA_DIR": str(tmp_path), **(environ or {})}
    return options.server_config(options.resolve(parser.parse_args(argv), environ), environ)


def test_the_blob_origin_option(tmp_path: Path) -> None:
    assert server_config(tmp_path, []).blob_url == "http://127.0.0.1:8080"
    chosen = server_config(tmp_path, ["--blob-origin", "https://Artifacts.Example.com/"])
    assert (chosen.blob_origin, chosen.blob_url) == ("https://artifacts.example.com",) * 2
    environ = {"TASKYARD_BLOB_ORIGIN": "http://localhost:8080"}
    assert server_config(tmp_path, [], environ).blob_url == "http://localhost:8080"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--blob-origin", "artifacts.example.com"], "http:// or https://"),
        (["--blob-origin", "https://artifacts.example.com/blobs"], "no path"),
        (["--blob-origin", "http://127.0.0.1:9000"], "host name other than the root URL's"),
        (["--public-url", "https://ci.example.com", "--blob-origin", "https://ci.example.com:8443"],
         "host name other than the root URL's"),
    ],
)  # fmt: skip
def test_a_bad_blob_origin_is_refused_naming_the_option(
    tmp_path: Path, argv: list[str], problem: str
) -> None:
    with pytest.raises(ConfigError, match=f"blob-origin.*{problem}"):
        server_config(tmp_path, argv)
