"""Direct SQL on the server's database: bulk copies of a task created over HTTP (the backlogs and the
groups), and counts of pending runs."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from typing import Any

from bench import lifecycle as lc
from bench.lifecycle import Server, slugid

STOP = threading.Event()  # tells a filling thread to stop between chunks (Ctrl-C)


class Database:
    """Direct SQL on the server's database: bulk copies of a created task, and counts."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def copy_task(self, template: str, count: int) -> None:
        raise NotImplementedError

    async def pending(self, task_queue_id: str) -> int:
        raise NotImplementedError

    async def any_pending(self, task_queue_id: str) -> str:
        raise NotImplementedError

    async def close(self) -> None:
        pass

    @staticmethod
    def sources(columns: dict[str, list[str]], params: tuple[str, str, str, str]) -> list[str]:
        """The three INSERT ... SELECT statements that copy the template's rows; `params` name the new
        task id, the template's id, the pending run's `inserted` and the poll message's id."""
        new_id, source, inserted, message_id = params
        copy = lc.Backlog.copy_sql
        where = f"s.task_id = {source}"
        return [
            copy("tasks", columns["tasks"], {"task_id": new_id}, where),
            copy("pending_runs", columns["pending_runs"], {"task_id": new_id, "inserted": inserted}, where),
            copy(  # by its primary key (the caller passes the template's message id): no task_id index
                "poll_messages",
                columns["poll_messages"],
                {"task_id": new_id, "message_id": message_id, "inserted": inserted, "visible": inserted},
                f"s.message_id = {source}",
            ),
        ]


class SQLiteDatabase(Database):
    CHUNK = 10_000  # short write transactions: the server keeps working between them

    def _connect(self) -> sqlite3.Connection:
        path = self.server.data_dir / "taskyard.sqlite3"
        return sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)

    async def copy_task(self, template: str, count: int) -> None:
        await asyncio.to_thread(self._copy, template, count)

    def _copy(self, template: str, count: int) -> None:
        conn = self._connect()
        try:
            columns = {
                t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")]
                for t in ("tasks", "pending_runs", "poll_messages")
            }
            statements = self.sources(columns, ("?1", "?2", "?3", "?4"))
            inserted = int(time.time() * 1000)
            sql = "SELECT message_id FROM poll_messages WHERE task_id = ?"
            template_message = conn.execute(sql, (template,)).fetchone()[0]
            for start in range(0, count, self.CHUNK):
                if STOP.is_set():
                    return
                rows = [
                    (slugid(), template, inserted, str(uuid.uuid4()))
                    for _ in range(min(self.CHUNK, count - start))
                ]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(statements[0], [r[:2] for r in rows])
                conn.executemany(statements[1], [r[:3] for r in rows])
                conn.executemany(statements[2], [(r[0], template_message, *r[2:]) for r in rows])
                conn.execute("COMMIT")
        finally:
            conn.close()

    async def pending(self, task_queue_id: str) -> int:
        def count() -> int:
            conn = self._connect()
            try:
                sql = "SELECT count(*) FROM pending_runs WHERE task_queue_id = ?"
                return int(conn.execute(sql, (task_queue_id,)).fetchone()[0])
            finally:
                conn.close()

        return await asyncio.to_thread(count)

    async def any_pending(self, task_queue_id: str) -> str:
        def first() -> str:
            conn = self._connect()
            try:
                sql = "SELECT task_id FROM pending_runs WHERE task_queue_id = ? LIMIT 1"
                return str(conn.execute(sql, (task_queue_id,)).fetchone()[0])
            finally:
                conn.close()

        return await asyncio.to_thread(first)


class PostgresDatabase(Database):
    CHUNK = 20_000

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.conn: Any = None

    async def _conn(self) -> Any:
        import asyncpg

        if self.conn is None:
            self.conn = await asyncpg.connect(self.server.db_url)
        return self.conn

    async def copy_task(self, template: str, count: int) -> None:
        conn = await self._conn()
        columns = {}
        for table in ("tasks", "pending_runs", "poll_messages"):
            sql = "SELECT column_name FROM information_schema.columns WHERE table_name = $1"
            sql += " ORDER BY ordinal_position"
            columns[table] = [r["column_name"] for r in await conn.fetch(sql, table)]
        statements = self.sources(columns, ("ids.id", "$2", "$3", "ids.mid"))
        ids_join = " CROSS JOIN unnest($1::text[], $4::text[]) AS ids(id, mid)"
        statements = [s.replace(" s WHERE", " s" + ids_join + " WHERE") for s in statements]
        inserted = int(time.time() * 1000)
        sql = "SELECT message_id FROM poll_messages WHERE task_id = $1"
        template_message = await conn.fetchval(sql, template)
        for start in range(0, count, self.CHUNK):
            if STOP.is_set():
                return
            n = min(self.CHUNK, count - start)
            ids, mids = [slugid() for _ in range(n)], [str(uuid.uuid4()) for _ in range(n)]
            async with conn.transaction():
                # asyncpg wants every $n a statement names: pad unused ones with a no-op condition.
                await conn.execute(
                    statements[0] + " AND $3::bigint IS NOT NULL", ids, template, inserted, mids
                )
                await conn.execute(statements[1], ids, template, inserted, mids)
                await conn.execute(statements[2], ids, template_message, inserted, mids)
        # What autovacuum would have done by the time a real backlog reached this size.
        await conn.execute("ANALYZE tasks; ANALYZE pending_runs; ANALYZE poll_messages")

    async def pending(self, task_queue_id: str) -> int:
        conn = await self._conn()
        return int(
            await conn.fetchval("SELECT count(*) FROM pending_runs WHERE task_queue_id = $1", task_queue_id)
        )

    async def any_pending(self, task_queue_id: str) -> str:
        conn = await self._conn()
        sql = "SELECT task_id FROM pending_runs WHERE task_queue_id = $1 LIMIT 1"
        return str(await conn.fetchval(sql, task_queue_id))

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
