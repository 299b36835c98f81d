"""The procrastinate app of bench/peers.py: one no-op task on the scratch database in PEERS_DSN.

Run by procrastinate_peer.py in the peers' virtual environment, never by taskyard's. The worker
process loads it with `procrastinate --app procrastinate_app.app worker`.
"""

from __future__ import annotations

import os

from procrastinate import App, PsycopgConnector

# Procrastinate's docs ("Mind the size of your PostgreSQL pool"): the shorter the jobs, the more
# the pool should hold as many connections as the worker's concurrency, plus one.
POOL = int(os.environ.get("PEERS_POOL", "9"))

app = App(connector=PsycopgConnector(conninfo=os.environ["PEERS_DSN"], min_size=POOL, max_size=POOL))


@app.task(name="noop", queue="peers")
async def noop() -> None:
    """Nothing: what is measured is the queue's own work per job."""
