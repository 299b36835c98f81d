"""Turns (`api/shedding.py`): at most so many requests are worked on at once; the others wait in the
order they came, and one that waits too long is answered 503 with nothing done."""

from __future__ import annotations

import asyncio

import pytest

from taskyard.api.shedding import Counts, Overloaded, Turns


async def test_requests_beyond_the_bound_wait_their_turn_in_arrival_order() -> None:
    counts = Counts()
    turns = Turns(2, counts)
    first, second = turns.turn(), turns.turn()
    await first.take(None)
    await second.take(None)
    order: list[int] = []

    async def later(n: int) -> None:
        turn = turns.turn()
        await turn.take(None)
        order.append(n)
        turn.give_back()

    waiting = [asyncio.create_task(later(n)) for n in range(3)]
    await asyncio.sleep(0)
    assert (order, counts.waiting) == ([], 3)
    first.give_back()
    first.give_back()  # given back twice: only once counted
    await asyncio.gather(*waiting)
    assert order == [0, 1, 2]
    assert counts.waiting == 0
    assert turns.running == 1  # `second` still holds its turn
    second.give_back()
    await asyncio.sleep(0)  # free from the loop's next turn on
    assert turns.running == 0


async def test_a_request_that_waits_too_long_is_overloaded_and_takes_no_turn() -> None:
    counts = Counts()
    turns = Turns(1, counts)
    held = turns.turn()
    await held.take(None)
    late = turns.turn()
    with pytest.raises(Overloaded) as refused:
        await late.take(0.01)
    assert refused.value.retry_after == 1
    assert counts.refused == 1  # counted as shed, in /metrics
    assert "nothing was done" in refused.value.message
    late.give_back()  # not taken: nothing to give back
    assert (turns.running, counts.waiting) == (1, 0)
    held.give_back()
    await asyncio.sleep(0)
    fresh = turns.turn()
    await fresh.take(None)  # the one that gave up left no place in the queue behind it
    assert turns.running == 1


async def test_a_cancelled_waiter_passes_on_the_turn_it_was_given() -> None:
    turns = Turns(1, Counts())
    held = turns.turn()
    await held.take(None)
    cancelled = asyncio.create_task(turns.turn().take(None))
    after = turns.turn()
    taking = asyncio.create_task(after.take(None))
    await asyncio.sleep(0)
    held.give_back()  # the turn goes to `cancelled`, which is cancelled before it runs
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    await taking  # ... and passes it on
    assert turns.running == 1
    after.give_back()
    await asyncio.sleep(0)
    assert turns.running == 0


async def test_no_bound_means_no_waiting() -> None:
    turns = Turns(0, Counts())
    taken = [turns.turn() for _ in range(100)]
    for turn in taken:
        await turn.take(0)
    assert turns.running == 100


async def test_a_turn_given_back_with_nobody_waiting_is_free_again_from_the_loops_next_turn() -> None:
    """Calls worked on whole in one step of the loop (SQLite's writer runs on the loop) give their
    turn back in the step that took it: still, at most `bound` of them are worked on per turn of
    the loop, the others waiting for the next."""
    turns = Turns(2, Counts())
    loop_turn = 0
    worked_in: list[int] = []

    async def count_loop_turns() -> None:
        nonlocal loop_turn
        while True:
            await asyncio.sleep(0)
            loop_turn += 1

    async def call() -> None:  # takes its turn, is worked on and gives it back without yielding
        turn = turns.turn()
        await turn.take(None)
        worked_in.append(loop_turn)
        turn.give_back()

    counter = asyncio.create_task(count_loop_turns())
    await asyncio.sleep(0)
    await asyncio.gather(*(call() for _ in range(6)))
    counter.cancel()
    assert len(worked_in) == 6
    assert max(worked_in.count(n) for n in set(worked_in)) == 2
    await asyncio.sleep(0)
    assert turns.running == 0


async def test_a_turn_given_back_in_the_step_that_took_it_still_counts_until_the_loops_next_turn() -> None:
    turns = Turns(1, Counts())
    first = turns.turn()
    await first.take(None)
    first.give_back()
    assert turns.running == 1  # a call asking in this same turn of the loop waits ...
    counts_before = turns.counts.waiting
    second = turns.turn()
    await second.take(None)  # ... and is handed the turn when it is released, in the next
    assert (counts_before, turns.running, turns.counts.waiting) == (0, 1, 0)
    second.give_back()
    await asyncio.sleep(0)
    assert turns.running == 0


async def test_a_turn_given_back_goes_at_once_to_a_request_already_waiting() -> None:
    turns = Turns(1, Counts())
    held = turns.turn()
    await held.take(None)
    waiting = turns.turn()
    taking = asyncio.create_task(waiting.take(None))
    await asyncio.sleep(0)
    held.give_back()  # handed over, not released
    await taking
    assert turns.running == 1
    waiting.give_back()
    await asyncio.sleep(0)
    assert turns.running == 0
