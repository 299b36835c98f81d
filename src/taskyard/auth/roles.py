"""Roles: create, read, list, update, delete; `assume:<roleId>` grants a role's scopes.

Every change runs in `Auth.change()`, whose first statement serialises auth changes across
processes, so the cycle check always sees every role. Creating the same role again is
idempotent; a different role under an existing id is a 409. A role's scopes are stored sorted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from taskyard.auth.clients import check_scopes
from taskyard.auth.service import Auth, scopes_from
from taskyard.model import roles, scopes
from taskyard.model.errors import InputError, RequestConflict, ResourceNotFound
from taskyard.model.guard import Guard
from taskyard.storage.port import Row, Session


@dataclass(frozen=True)
class RoleRecord:
    """A role as stored."""

    role_id: str
    description: str
    scopes: tuple[str, ...]
    created: int
    last_modified: int


def role_from_row(row: Row) -> RoleRecord:
    return RoleRecord(
        row["role_id"], row["description"], scopes_from(row), row["created"], row["last_modified"]
    )


def sort_scopes(given: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(given, key=scopes.scope_sort_key))


def _check_input(role_id: str, given: Sequence[str]) -> None:
    if role_id.endswith("**"):
        raise InputError(f"roleId must not end with `**`: {role_id[:200]!r}")
    check_scopes(given)


# ---------------------------------------------------------------------------------------------------
# Reads.


async def get_role(auth: Auth, role_id: str) -> RoleRecord:
    """The role, or 404."""
    async with auth.storage.reader() as session:
        row = await session.fetchrow("get_role", role_id)
    if row is None:
        raise ResourceNotFound(f"role {role_id!r} does not exist")
    return role_from_row(row)


async def list_roles(auth: Auth) -> list[RoleRecord]:
    """Every role, by roleId."""
    async with auth.storage.reader() as session:
        return await _all(session)


async def _all(session: Session) -> list[RoleRecord]:
    found = [role_from_row(row) for row in await session.fetch("list_roles")]
    return sorted(found, key=lambda r: r.role_id)  # the same order on every backend, whatever its collation


# ---------------------------------------------------------------------------------------------------
# Changes.


async def create_role(
    auth: Auth, role_id: str, description: str, given: Sequence[str], *, guard: Guard
) -> RoleRecord:
    """Create the role; 400 if it would make a dependency cycle, 409 if a different one has the id.

    Idempotent: the same description and scopes again answer the existing role. `guard` gets
    `scopes`, the role's scopes, which the caller must hold.
    """
    _check_input(role_id, given)
    guard(scopes=list(given))
    wanted = sort_scopes(given)
    async with auth.change() as tx:
        current = await _all(tx)
        existing = next((r for r in current if r.role_id == role_id), None)
        if existing is not None:
            if existing.description != description or existing.scopes != wanted:
                raise RequestConflict(
                    f"role {role_id!r} already exists with another description or other scopes; "
                    "updateRole changes a role"
                )
            return existing
        _validate([*current, RoleRecord(role_id, description, wanted, 0, 0)], role_id)
        await tx.execute("insert_role", role_id, description, orjson.dumps(wanted).decode(), auth.clock())
        return role_from_row(await _require(tx, role_id))


async def update_role(
    auth: Auth, role_id: str, description: str, given: Sequence[str], *, guard: Guard
) -> RoleRecord:
    """Replace the role's description and scopes; 404 if it does not exist, 400 on a cycle.

    `guard` gets `scopesAdded`: the scopes the role's former expansion did not satisfy.
    """
    _check_input(role_id, given)
    wanted = sort_scopes(given)
    async with auth.change() as tx:
        current = await _all(tx)
        existing = next((r for r in current if r.role_id == role_id), None)
        if existing is None:
            raise ResourceNotFound(f"role {role_id!r} does not exist")
        former = _role_set(current).expand(existing.scopes)
        guard(scopesAdded=[s for s in wanted if not scopes.satisfies_all(former, [s])])
        others = [r for r in current if r.role_id != role_id]
        _validate([*others, RoleRecord(role_id, description, wanted, 0, 0)], role_id)
        await tx.execute("update_role", role_id, description, orjson.dumps(wanted).decode(), auth.clock())
        return role_from_row(await _require(tx, role_id))


async def delete_role(auth: Auth, role_id: str) -> None:
    """Delete the role; deleting one that does not exist succeeds too."""
    async with auth.change() as tx:
        await tx.execute("delete_role", role_id)


async def _require(session: Session, role_id: str) -> Row:
    row = await session.fetchrow("get_role", role_id)
    assert row is not None, "the role was written in this transaction"
    return row


def _role_set(records: Sequence[RoleRecord]) -> roles.RoleSet:
    return roles.RoleSet(roles.Role(r.role_id, r.scopes) for r in records)


def _validate(records: Sequence[RoleRecord], role_id: str) -> None:
    """400 if the new or changed role has an ambiguous parameter, or the roles now have a cycle."""
    changed = next(r for r in records if r.role_id == role_id)
    try:
        roles.validate_role(roles.Role(changed.role_id, changed.scopes))
    except roles.InvalidRole as exc:
        raise InputError(str(exc)) from None
    cycle = roles.find_cycle(_role_set(records))
    if cycle is not None:
        raise InputError(roles.cycle_message(cycle))
