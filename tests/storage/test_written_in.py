"""A query's parameter written into its text (`-- literal: <name>`): PostgreSQL keeps a plan for
each of its values. claimWork's `take_pending` writes in its count, so a plan kept for it is one
for that count, not one made for a tenth of the backlog."""

from __future__ import annotations

import pytest

from taskyard.storage import _queries
from taskyard.storage.port import Row, Storage
from taskyard.storage.postgres import PostgresStorage
from tests.storage.helpers import _pending, take


def test_only_the_last_parameter_can_be_written_in() -> None:
    sql = "-- literal: count\nSELECT 1 WHERE :queue = 'q' LIMIT :count"
    assert _queries._literal_index("q", sql) == 1
    with pytest.raises(ValueError, match="only its last parameter"):
        _queries._literal_index("q", "-- literal: queue\nSELECT 1 WHERE :queue = 'q' LIMIT :count")
    assert _queries.written_in("postgres") == {"take_pending": 4}


async def _take(storage: Storage, count: int) -> list[Row]:
    async with storage.transaction() as tx:
        return await take(tx, count, 1)


@pytest.mark.postgres
async def test_on_postgresql_each_claim_count_has_a_statement_of_its_own(
    one_connection: PostgresStorage,
) -> None:
    storage = one_connection
    for n in range(3):
        await _pending(storage, f"t{n}", 0, n)
    assert [r["task_id"] for r in await _take(storage, 1)] == ["t0"]
    assert [r["task_id"] for r in await _take(storage, 2)] == ["t1", "t2"]
    async with storage._open_pool().connection() as conn:
        texts = [r["statement"] for r in await conn.fetch("SELECT statement FROM pg_prepared_statements")]
    claims = [text for text in texts if "Take the first claimable runs" in text]
    assert len(claims) == 2
    assert any("LIMIT 1\n" in text for text in claims) and any("LIMIT 2\n" in text for text in claims)
    with pytest.raises(TypeError, match="takes an int"):
        await _take(storage, "1")  # type: ignore[arg-type]
