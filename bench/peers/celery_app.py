"""The Celery app of bench/peers.py: one no-op task on RabbitMQ, counted done in Redis.

Run by celery_peer.py in the peers' virtual environment, never by taskyard's. The worker loads it
with `celery -A celery_app worker`. Its settings come from the environment (PEERS_BROKER,
PEERS_QUEUE, PEERS_REDIS, PEERS_PREFETCH) so the worker and the sender agree.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready
from kombu import Exchange, Queue

QUEUE = os.environ.get("PEERS_QUEUE", "peers-bench")
REDIS_URL = os.environ.get("PEERS_REDIS", "redis://127.0.0.1:6379/0")
KEEP_S = 600  # the Redis keys go away by themselves this long after the bench

app = Celery("peers", broker=os.environ.get("PEERS_BROKER", "amqp://guest:guest@127.0.0.1:5672//"))
app.conf.update(
    # No result backend; results are not stored.
    task_ignore_result=True,
    # Acknowledge after the task ran, as taskyard's reportCompleted comes after the work.
    task_acks_late=True,
    # Celery's "Optimizing" guide: for many short tasks the prefetch multiplier should be large.
    worker_prefetch_multiplier=int(os.environ.get("PEERS_PREFETCH", "64")),
    # No remote control, task events or result bookkeeping: none is needed to run tasks.
    worker_enable_remote_control=False,
    worker_send_task_events=False,
    task_send_sent_event=False,
    broker_connection_retry_on_startup=True,
    # The bench's own queue: durable, persistent messages (the default). Neither it nor its exchange
    # is auto_delete or expiring: kombu declares such entities again before every publish (it
    # cannot cache them), which tripled the cost of apply_async here. celery_peer.py deletes both.
    task_default_queue=QUEUE,
    task_queues=[Queue(QUEUE, Exchange(QUEUE, type="direct"), routing_key=QUEUE)],
    task_default_exchange=QUEUE,
    task_default_routing_key=QUEUE,
)

_redis: redis.Redis | None = None


def counter() -> redis.Redis:
    global _redis
    if _redis is None:  # made in each worker process (or thread's first use), after the fork
        _redis = redis.Redis.from_url(REDIS_URL)
    return _redis


@app.task(name="noop")
def noop(key: str, total: int) -> None:
    """No work; the one thing it does is count itself done: the bench needs to know when all are."""
    r = counter()
    pipe = r.pipeline(transaction=False)
    pipe.set(f"{key}:first", time.time(), nx=True, ex=KEEP_S)
    pipe.incr(f"{key}:done")  # the sender made this key, with its expiry
    if pipe.execute()[1] == total:
        r.set(f"{key}:last", time.time(), ex=KEEP_S)


@worker_ready.connect
def _ready(**_: Any) -> None:
    counter().set(f"{QUEUE}:ready", 1, ex=KEEP_S)
