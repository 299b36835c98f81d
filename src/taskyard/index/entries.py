"""The index's operations: insert, find, list and delete entries, and the expiry sweep.

Ranks: an entry is replaced by one of an equal or higher rank, never by a lower one (the insert
then answers the entry that stays). An expired entry is gone to every read, and to an insert
too, even before the sweep deletes it.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import orjson

from taskyard.index.service import Index
from taskyard.model import dates, paging
from taskyard.model.errors import ResourceNotFound
from taskyard.model.index_paths import Entry, IndexedTask, join, namespace_expiry, namespace_levels, split
from taskyard.model.types import JSONObject
from taskyard.storage.port import Row, Tx

SWEEP_BATCH = 1000
LOOKUPS = paging.MAX_LIMIT  # paths findTasksAtIndex looks up for one page, found or not


class Namespace(TypedDict):
    namespace: str
    name: str
    expires: str


class NamespaceList(paging.Page):
    namespaces: list[Namespace]


class TaskList(paging.Page):
    tasks: list[IndexedTask]


class FoundTasks(TypedDict):
    tasks: list[IndexedTask]
    continuationToken: NotRequired[str]


def _answer(path: str, row: Row) -> IndexedTask:
    data: JSONObject = orjson.loads(row["data"])
    return {
        "namespace": path,
        "taskId": row["task_id"],
        "rank": int(row["rank"]),
        "data": data,
        "expires": dates.to_iso(int(row["expires"])),
    }


async def insert_many_tx(ix: Index, tx: Tx, items: list[tuple[str, Entry]]) -> list[Row]:
    """Store each (path, entry) by the rank rules (a path given twice: in the order given), then
    the namespaces above the entries written; answer, for each, the row there afterwards (the old
    one when it outranks the entry).

    Every writer locks rows in one order, entries by key, then namespaces by key (a path's own
    from the root down), so that two on PostgreSQL never wait for each other in a cycle."""
    order = sorted(range(len(items)), key=lambda i: split(items[i][0]))  # stable: repeats in order
    rows: dict[int, Row] = {}
    namespaces: dict[tuple[str, str], int] = {}
    now = ix.clock()
    for i in order:
        path, entry = items[i]
        namespace, name = split(path)
        data = orjson.dumps(entry.data).decode()
        written = await tx.execute(
            "upsert_indexed_task",
            namespace=namespace,
            entry_name=name,
            rank=entry.rank,
            task_id=entry.task_id,
            data=data,
            expires=entry.expires,
            now=now,
        )
        if written:
            rows[i] = {"task_id": entry.task_id, "rank": entry.rank, "data": data, "expires": entry.expires}
            for level in namespace_levels(namespace):
                namespaces[level] = max(namespaces.get(level, 0), namespace_expiry(entry.expires))
        else:
            row = await tx.fetchrow("get_indexed_task", namespace, name)
            assert row is not None  # the conflict that kept it is in this transaction's snapshot
            rows[i] = row
    if namespaces:
        ensured = [(parent, name, expires) for (parent, name), expires in sorted(namespaces.items())]
        await tx.executemany("ensure_index_namespace", ensured)
    return [rows[i] for i in range(len(items))]


async def insert_task(ix: Index, path: str, entry: Entry) -> IndexedTask:
    """insertTask: store `entry` at `path` (the rank rules decide); answer what is stored."""
    async with ix.storage.transaction() as tx:
        (row,) = await insert_many_tx(ix, tx, [(path, entry)])
    return _answer(path, row)


async def find_task(ix: Index, path: str) -> IndexedTask:
    """findTask: the unexpired entry at `path`, or 404."""
    namespace, name = split(path)
    async with ix.storage.reader() as session:
        row = await session.fetchrow("find_indexed_task", namespace, name, ix.clock())
    if row is None:
        raise ResourceNotFound(f"Indexed task not found: nothing is indexed at {path}")
    return _answer(path, row)


async def find_tasks_at_index(ix: Index, paths: list[str], page: paging.Query) -> FoundTasks:
    """findTasksAtIndex: the unexpired entries at `paths`, in the order asked, each path once,
    unknown ones skipped. The token is where in `paths` the next page starts (valid only with the
    same body, as TaskCluster says of its own). A page looks up at most LOOKUPS paths, so a body of
    many unknown paths is answered a page at a time like any other, each with its token."""
    start = paging.offset(page)
    unique = list(dict.fromkeys(paths))
    found: list[IndexedTask] = []
    position = start
    now = ix.clock()
    async with ix.storage.reader() as session:
        while position < len(unique) and len(found) < page.limit and position - start < LOOKUPS:
            path = unique[position]
            position += 1
            if "." not in path:
                continue  # as TaskCluster: a path without a dot names no entry here
            row = await session.fetchrow("find_indexed_task", *split(path), now)
            if row is not None:
                found.append(_answer(path, row))
    token = paging.encode({"o": position}) if position < len(unique) else None
    return {"tasks": found, **paging.more(token)}


async def list_namespaces(ix: Index, namespace: str, page: paging.Query) -> NamespaceList:
    """listNamespaces: the unexpired namespaces directly under `namespace`, by name."""
    (after,) = paging.after(page, 1, [""])
    async with ix.storage.reader() as session:
        rows = await session.fetch("list_index_namespaces", namespace, after, ix.clock(), page.limit + 1)
    shown = rows[: page.limit]
    items: list[Namespace] = [
        {
            "namespace": join(namespace, r["name"]),
            "name": r["name"],
            "expires": dates.to_iso(int(r["expires"])),
        }
        for r in shown
    ]
    last: list[object] | None = [shown[-1]["name"]] if shown else None
    return {"namespaces": items, **paging.more(paging.keyset_token(rows, last, page.limit))}


async def list_tasks(ix: Index, namespace: str, page: paging.Query) -> TaskList:
    """listTasks: the unexpired entries directly in `namespace`, by name."""
    (after,) = paging.after(page, 1, [""])
    async with ix.storage.reader() as session:
        rows = await session.fetch("list_indexed_tasks", namespace, after, ix.clock(), page.limit + 1)
    shown = rows[: page.limit]
    items = [_answer(join(namespace, r["name"]), r) for r in shown]
    last: list[object] | None = [shown[-1]["name"]] if shown else None
    return {"tasks": items, **paging.more(paging.keyset_token(rows, last, page.limit))}


async def delete_task(ix: Index, path: str) -> None:
    """deleteTask: remove the entry at `path`, if any; its namespaces stay until they expire."""
    async with ix.storage.transaction() as tx:
        await tx.execute("delete_indexed_task", *split(path))


async def sweep_expired(ix: Index) -> int:
    """Delete up to a batch of expired entries and of expired namespaces; answer how many."""
    now = ix.clock()
    async with ix.storage.transaction() as tx:
        swept = await tx.execute("expire_indexed_tasks", now, SWEEP_BATCH)
        swept += await tx.execute("expire_index_namespaces", now, SWEEP_BATCH)
    return swept
