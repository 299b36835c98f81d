"""Wake-ups: notify(None), sent when notifications may have been lost, wakes everyone to look again."""

from __future__ import annotations

import asyncio

from taskyard.queue.signals import Followers, PendingSignals


async def test_notify_none_wakes_every_waiter_of_every_queue() -> None:
    signals = PendingSignals()
    gone = asyncio.Event()
    with signals.waiter("a/1") as first, signals.waiter("a/1") as second, signals.waiter("b/2") as third:
        signals.notify(None)
        woken = await asyncio.gather(*(w.wait(5, gone) for w in (first, second, third)))
    assert woken == [True, True, True]
    assert signals.waiting("a/1") == signals.waiting("b/2") == 0


async def test_notify_none_wakes_every_follower() -> None:
    followers = Followers()
    with followers.watch("t/0") as one, followers.watch("u/1") as other:
        followers.notify(None)
        assert one.is_set() and other.is_set()


def test_empty_poll_queues() -> None:
    from taskyard.queue.signals import EmptyPollQueues

    empty = EmptyPollQueues()
    before = empty.snapshot()
    empty.mark_empty("a", before, 100)
    assert empty.is_empty("a", 99) and not empty.is_empty("a", 100)
    empty.heard("a")
    assert not empty.is_empty("a", 0)
    racing = empty.snapshot()
    empty.heard("b")  # a message on b committed while b was being queried
    empty.mark_empty("b", racing, 100)
    assert not empty.is_empty("b", 0)
    empty.mark_empty("a", racing, 100)  # a heard nothing since: marked
    assert empty.is_empty("a", 0)
    lost = empty.snapshot()
    empty.heard(None)
    assert not empty.is_empty("a", 0)
    empty.mark_empty("c", lost, 100)  # queried before notifications were lost: not trusted
    assert not empty.is_empty("c", 0)
