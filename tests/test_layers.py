"""Dependencies point down only (docs/architecture.md, Layers): model, adapters, services, edges."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src" / "taskyard"
# What each package may import from taskyard (besides itself), and which drivers it may use.
ALLOWED = {
    "model": set(),
    # Every use of a dependency's internals, a module per dependency (see INTERNALS below).
    "internals": set(),
    "storage": {"model", "internals"},
    "artifacts": {"model"},
    "events": {"model", "storage", "internals"},
    "auth": {"model", "storage", "events"},
    "queue": {"model", "storage", "events", "artifacts", "auth", "config"},
    "scheduler": {"model", "storage", "events", "queue"},
    "secrets": {"model", "storage"},
    "hooks": {"model", "storage", "events", "queue", "secrets"},
    "index": {"model", "storage", "events", "queue"},
    "notify": {"model", "storage", "events", "queue"},
    "pools": {"model", "storage", "events", "queue", "auth"},
    "api": {
        "model",
        "storage",
        "events",
        "artifacts",
        "auth",
        "queue",
        "scheduler",
        "secrets",
        "index",
        "hooks",
        "notify",
        "pools",
        "config",
        "internals",
        "__init__",
    },
    # The web UI sits on the API: every page reads and acts through the API's call pipeline (so
    # that its scope checks are the API's), and the composition root (cli/serve.py) mounts it on
    # the app. The API never imports the UI, and the UI never storage: what a page shows comes from a
    # step of the pipeline, typed by the API (`api/pages.py`).
    "ui": {
        "model",
        "events",
        "artifacts",
        "auth",
        "queue",
        "scheduler",
        "secrets",
        "index",
        "hooks",
        "notify",
        "pools",
        "config",
        "api",
        "internals",
        "__init__",
    },
    # The worker is a client of the API: it signs requests, and never reaches into the server.
    "worker": {"model", "auth", "config", "lockfile"},
    "cli": {
        "model",
        "storage",
        "events",
        "artifacts",
        "auth",
        "queue",
        "scheduler",
        "secrets",
        "index",
        "hooks",
        "notify",
        "pools",
        "api",
        "ui",
        "config",
        "worker",
        "lockfile",
        "internals",
        "__init__",
    },
}
DRIVERS = {
    "asyncpg": {"storage"},
    "aiosqlite": {"storage"},
    "sqlite3": {"storage"},
    "aio_pika": {"events", "worker"},
    "aiormq": {"events", "internals"},  # aio-pika's own driver: the RabbitMQ bus uses its channel
    "boto3": {"artifacts"},
    "botocore": {"artifacts"},
    "aiohttp": {"worker"},
    # The web framework and the server stay at the edges: the HTTP API, and the command that serves it.
    "starlette": {"api", "ui", "cli", "internals"},
    "jinja2": {"ui"},
    "cryptography": {"secrets"},  # the secrets service's encryption at rest
    "croniter": {"hooks"},  # hooks' schedules
    "jsone": {"hooks", "notify"},  # hooks' task templates, notify's custom messages
    "jsonschema": {"hooks"},  # hooks' trigger payloads
    "uvicorn": {"cli", "internals"},
}
# Each module of `internals/`, and the driver whose internals it holds (None: the standard
# library's): a package imports it only if it may import that driver.
INTERNALS = {"web": "starlette", "server": "uvicorn", "locks": None, "amqp": "aiormq"}
# Modules of a dependency that are its internals though their names are not private.
PRIVATE_MODULES = ("uvicorn.protocols",)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    for path in (SRC / package).rglob("*.py"):
        for name in imports(path):
            top = name.split(".")[0]
            if top == "taskyard":
                parts = name.split(".")
                target = parts[1] if len(parts) > 1 else "__init__"
                assert target == package or target in ALLOWED[package], f"{path.name} imports {name}"
            elif top in DRIVERS:
                assert package in DRIVERS[top], f"{path.name} imports the driver {name}"


def test_a_package_imports_only_the_internals_of_drivers_it_may_use() -> None:
    assert {path.stem for path in (SRC / "internals").glob("*.py")} == {"__init__", *INTERNALS}
    for package in ALLOWED:
        for path in (SRC / package).rglob("*.py"):
            for name in imports(path):
                if name.startswith("taskyard.internals."):
                    driver = INTERNALS[name.split(".")[2]]
                    assert driver is None or package in DRIVERS[driver], f"{path.name} imports {name}"


def private_uses(path: Path) -> set[str]:
    """What `path` imports of a dependency's (or the standard library's) private names and modules."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
            found.update(f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_"))
        for module in modules:
            if module.startswith(PRIVATE_MODULES) or any(part.startswith("_") for part in module.split(".")):
                found.add(module)
    return {name for name in found if not name.startswith(("taskyard.", "__future__"))}


def test_only_internals_imports_a_dependencys_private_names() -> None:
    """A private name or module of a dependency is imported in `internals/` alone, where each use
    says why and `tests/test_internals.py` checks it against the versions it knows."""
    for path in SRC.rglob("*.py"):
        if path.parent.name != "internals":
            assert not private_uses(path), f"{path.relative_to(SRC)} imports {sorted(private_uses(path))}"
    assert private_uses(SRC / "internals" / "web.py")  # the check sees what it looks for


def test_the_api_never_imports_the_ui() -> None:
    """The UI is mounted on the app by whoever builds it (`build_app(services, site)`): an import of
    the UI from the API, even a late one inside a function, would be the old cycle back."""
    for path in (SRC / "api").rglob("*.py"):
        for name in imports(path):
            assert not name.startswith("taskyard.ui"), f"{path.name} imports {name}"
        assert "taskyard.ui" not in path.read_text(), f"{path.name} names taskyard.ui"


# What the UI may use of the API: the call pipeline and the pages' guarded operations, the caller,
# the shapes of calls and streams, and the app's types. Never a route module: a page calls a
# route through the pipeline (`api.calls.route(name)`), not its handler.
UI_USES_OF_API = {"calls", "pages", "log_tail", "authz", "routing", "streams", "app"}


def test_the_ui_reaches_the_api_only_through_the_pipeline() -> None:
    for path in (SRC / "ui").rglob("*.py"):
        for name in imports(path):
            if name.startswith("taskyard.api."):
                assert name.split(".")[2] in UI_USES_OF_API, f"{path.name} imports {name}"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "taskyard.api":
                for alias in node.names:
                    assert alias.name in UI_USES_OF_API, f"{path.name} imports taskyard.api.{alias.name}"


def test_no_page_reads_storage_itself() -> None:
    """What a viewer reads, a page reads through the pipeline (`api.calls`), whose steps check
    scopes and fail closed; only the sign-in sessions' own table is the UI's to read directly."""
    for path in (SRC / "ui").rglob("*.py"):
        if path.name == "sessions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("storage", "reader", "transaction", "fetch", "fetchrow"), (
                    f"{path.name}:{node.lineno} reads storage (.{node.attr}) instead of calling a step"
                )


def test_single_modules_import_no_driver() -> None:
    """`config.py`, `lockfile.py` and the version module sit beside the packages: no driver, no framework."""
    for path in SRC.glob("*.py"):
        for name in imports(path):
            assert name.split(".")[0] not in DRIVERS, f"{path.name} imports the driver {name}"


def test_services_import_only_the_storage_port() -> None:
    for package in ("queue", "auth", "api", "cli"):
        for path in (SRC / package).rglob("*.py"):
            for name in imports(path):
                assert not name.startswith(
                    (
                        "taskyard.storage.sqlite",
                        "taskyard.storage.postgres",
                        "taskyard.artifacts.local",
                        "taskyard.artifacts.s3",
                    )
                ), path.name


def test_no_wait_for_wraps_an_events_wait() -> None:
    """`asyncio.wait_for(event.wait(), t)` of Python 3.11 swallows a cancel that comes as the event
    is set, and a loop around it runs on for ever (a shutdown waits for it): `asyncio.timeout`."""
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"asyncio\.wait_for\([\w.]+\.wait\(\)", line)
    ]
    assert found == [], found
