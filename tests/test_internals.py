"""What taskyard takes from its dependencies' internals (`src/taskyard/internals/`) is still there
and does what it is used for; and the installed versions are those it was checked against.

On a failure here after an upgrade: the message names the use; mend it in `internals/` (or its
caller), then widen `CHECKED` and pyproject.toml's bound together."""

from __future__ import annotations

import asyncio
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from taskyard.internals import CHECKED, locks, server, web

ROOT = Path(__file__).parent.parent


def minor(text: str) -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", text)
    assert found, f"not a version: {text!r}"
    return int(found[1]), int(found[2])


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_the_installed_version_is_one_the_internals_were_checked_against(package: str) -> None:
    oldest, newest = CHECKED[package]
    installed = version(package)
    assert release(oldest) <= release(installed) and minor(installed) <= minor(newest), (
        f"src/taskyard/internals/ was checked against {package} {oldest} to {newest}, and {installed} is "
        f"installed: check its uses of {package} (this file's tests name them) and widen the range "
        "(CHECKED in internals/__init__.py, and pyproject.toml's bound)"
    )


@pytest.mark.parametrize("package", sorted(CHECKED))
def test_pyproject_bounds_the_package_to_the_checked_versions(package: str) -> None:
    oldest, newest = CHECKED[package]
    major, last = minor(newest)
    wanted = f"{package}>={oldest},<{major}.{last + 1}"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert wanted in declared, f"pyproject.toml should declare {wanted!r}, as CHECKED says"


# starlette (internals/web.py)


def test_get_route_path_is_the_path_below_the_root_path() -> None:
    assert web.get_route_path({"path": "/api/queue/v1/ping", "root_path": ""}) == "/api/queue/v1/ping"
    assert web.get_route_path({"path": "/tc/api/queue/v1/ping", "root_path": "/tc"}) == "/api/queue/v1/ping"


async def sent(response: Response) -> list[Message]:
    messages: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    scope: Scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    await response(scope, receive, send)
    return messages


@pytest.mark.parametrize(
    ("body", "status", "headers"),
    [
        ({"taskId": "x"}, 200, None),
        (None, 200, None),
        (None, 204, None),
        ({"a": 1}, 304, None),
        ({"code": "ResourceNotFound"}, 404, {"x-taskcluster-endpoint": "e"}),
        ([1, 2], 200, {"content-type": "application/json; charset=utf-8", "content-length": "5"}),
    ],
)
async def test_json_response_sends_what_a_starlette_response_sends(
    body: Any, status: int, headers: dict[str, str] | None
) -> None:
    """`json_response` skips `Response.__init__` (`Response.__new__`): what it sends must be what
    the constructed one sends."""
    content = None if body is None else orjson.dumps(body)
    media_type = None if body is None else "application/json"
    built = Response(content, status, headers, media_type)
    assert await sent(web.json_response(body, status, headers)) == await sent(built)


def test_parse_range_reads_a_range_as_file_response_does() -> None:
    """`FileResponse._parse_range_header`: the ranges, end exclusive; its two refusals."""
    assert web.parse_range("bytes=0-9", 100) == [(0, 10)]
    assert web.parse_range("bytes=90-", 100) == [(90, 100)]
    with pytest.raises(web.MalformedRangeHeader):
        web.parse_range("lines=1-2", 100)
    with pytest.raises(web.RangeNotSatisfiable):
        web.parse_range("bytes=200-300", 100)


# asyncio (internals/locks.py)


async def test_queued_says_whether_a_task_waits_for_the_lock() -> None:
    """`asyncio.Lock._waiters`: nobody at first; a task waiting; still queued, the lock free, once
    woken by a release and not yet running; nobody once it has it."""
    lock = asyncio.Lock()
    assert not locks.queued(lock)
    await lock.acquire()
    waiter = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    assert locks.queued(lock)
    lock.release()
    assert not lock.locked() and locks.queued(lock)
    await waiter
    assert lock.locked() and not locks.queued(lock)
    lock.release()


# uvicorn (internals/server.py)


class Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.7", 4321) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def test_the_httptools_protocol_has_the_hooks_and_attributes_the_subclass_uses() -> None:
    """`HttpToolsProtocol` (cli/connections.py subclasses it): each hook it overrides, and, through
    one request, each attribute of the protocol and of the request's cycle that it reads."""
    import uvicorn
    from uvicorn.server import ServerState

    for hook in server.PROTOCOL_HOOKS:
        assert callable(getattr(server.HttpToolsProtocol, hook, None)), f"HttpToolsProtocol.{hook} is gone"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(app, http="httptools", lifespan="off", log_level="warning")
    protocol = server.HttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
    transport = Recording()
    protocol.connection_made(transport)
    protocol.data_received(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
    for attribute in server.PROTOCOL_ATTRIBUTES:
        assert hasattr(protocol, attribute), f"HttpToolsProtocol has no {attribute} any more"
    assert protocol.loop is asyncio.get_running_loop()
    assert protocol.client == ("10.0.0.7", 4321)
    assert protocol.transport is transport
    assert protocol.scope["path"] == "/x"
    cycle = protocol.cycle
    assert isinstance(cycle, server.RequestResponseCycle)
    for attribute in server.CYCLE_ATTRIBUTES:
        assert hasattr(cycle, attribute), f"RequestResponseCycle has no {attribute} any more"
    assert isinstance(cycle.message_event, asyncio.Event)
    assert (cycle.response_started, cycle.response_complete, cycle.disconnected) == (False, False, False)
    for _ in range(10):
        await asyncio.sleep(0)
    assert cycle.response_started and cycle.response_complete
    assert transport.written.startswith(b"HTTP/1.1 204 ")  # what the head-with-body transport holds
    protocol.connection_lost(None)


def test_trusted_hosts_takes_addresses_and_networks_as_forwarded_allow_ips_does() -> None:
    trusted = server.TrustedHosts("127.0.0.1,::1,10.0.0.0/8")
    assert "127.0.0.1" in trusted and "::1" in trusted and "10.1.2.3" in trusted
    assert "192.0.2.1" not in trusted
    assert "192.0.2.1" in server.TrustedHosts("*")
    assert "10.1.2.3" in server.TrustedHosts(["10.1.2.3"])


def test_the_server_has_what_serve_overrides_and_reads() -> None:
    """cli/serve.py's `_Server` overrides `handle_exit` and `shutdown`, and reads `started` and
    `should_exit`."""
    import uvicorn

    assert callable(uvicorn.Server.handle_exit) and callable(uvicorn.Server.shutdown)
    served = uvicorn.Server(uvicorn.Config(lambda *_: None))
    assert served.started is False and served.should_exit is False
