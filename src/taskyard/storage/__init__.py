"""Storage: one port (`port.py`), two adapters chosen by URL."""

from __future__ import annotations

from taskyard.model.errors import ConfigError
from taskyard.storage.port import Storage


def sqlite_path(url: str) -> str | None:
    """The file of a `sqlite:///relative` or `sqlite:////absolute` URL (`:memory:` if empty); None
    for any other URL."""
    if not url.startswith("sqlite://"):
        return None
    path = url.removeprefix("sqlite://")
    path = path[1:] if path.startswith("/") else path  # sqlite:////abs -> /abs, sqlite:///rel -> rel
    return path if path else ":memory:"


async def open_storage(url: str) -> Storage:
    """Open `sqlite:///path/to/file` or `postgresql://user@host/db`, migrating it first."""
    path = sqlite_path(url)
    if path is not None:
        from taskyard.storage.sqlite import open_sqlite

        return await open_sqlite(path)
    if url.startswith(("postgresql://", "postgres://")):
        from taskyard.storage.postgres import open_postgres

        return await open_postgres(url)
    raise ConfigError("db", url, "must start with sqlite:/// or postgresql://")
