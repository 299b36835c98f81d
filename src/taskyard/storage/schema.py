"""Which schema versions this taskyard knows, and refusing a database made by a newer one.

Each adapter's migrate step reads the versions a database records in `schema_migrations`
and calls `check_applied()` before applying anything: a version this code has no migration
for was written by a newer taskyard, whose tables this code does not understand. Running on
them could lose or corrupt what the newer one stored, so start-up stops instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from taskyard.model.errors import TaskyardError
from taskyard.storage import _queries


class NewerSchema(TaskyardError):
    """The database was migrated by a newer taskyard than this one."""


def known_versions(dialect: str) -> dict[int, str]:
    """{version: name} of every migration this taskyard has for `dialect`."""
    return {version: name for version, name, _ in _queries.migrations(dialect)}


def check_applied(applied: Iterable[int], dialect: str, where: str) -> None:
    """NewerSchema if `applied` holds a version this taskyard has no migration for."""
    known = known_versions(dialect)
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise NewerSchema(
            f"the database {where} has schema version {unknown[-1]}, written by a newer taskyard; "
            f"this one knows versions up to {max(known)}: run the newer taskyard, or restore a "
            "backup taken before the upgrade"
        )
