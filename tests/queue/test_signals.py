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
