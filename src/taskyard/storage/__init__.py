"""Storage: one port (`port.py`), two adapters chosen by URL."""

from __future__ import annotations

from taskyard.model.errors import ConfigError
from taskyard.storage.port import Storage


async def open_storage(url: str) -> Storage:
    """Open `sqlite:///path/to/file` or `postgresql://user@host/db`, migrating it first."""
    if url.startswith("sqlite://"):
        from taskyard.storage.sqlite import open_sqlite

        path = url.removeprefix("sqlite://")
        path = path[1:] if path.startswith("/") and not path.startswith("//") else path
        return await open_sqlite(path if path else ":memory:")
    if url.startswith(("postgresql://", "postgres://")):
        from taskyard.storage.postgres import open_postgres

        return await open_postgres(url)
    raise ConfigError("db", url, "must start with sqlite:/// or postgresql://")
