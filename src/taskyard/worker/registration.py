"""A worker that registers with the worker-manager (`taskyard worker --register URL`) instead of
being given a client: it proves itself with the static secret of its file, gets credentials for
its pool and id only, and registers again (`reregisterWorker`, with the secret the last
registration gave it) before they expire, swapping in the new ones as it runs."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from taskyard.config import WorkerConfig
from taskyard.worker.client import Credentials, QueueClient

log = logging.getLogger(__name__)

AHEAD = 0.2  # register again when this part of the credentials' life is left
RETRY = 60.0  # seconds between tries when registering again fails


@dataclass
class Registered:
    """What the last registration gave: when its credentials expire, and the secret that
    registers again."""

    expires: float  # epoch seconds
    lifetime: float  # seconds the credentials were given for
    secret: str


def _credentials(answer: Any) -> Credentials:
    creds = answer["credentials"]
    return Credentials(creds["clientId"], creds["accessToken"], creds.get("certificate") or None)


def _expiry(answer: Any) -> float:
    return datetime.fromisoformat(str(answer["expires"]).replace("Z", "+00:00")).timestamp()


async def register(config: WorkerConfig) -> tuple[WorkerConfig, Registered]:
    """registerWorker with the secret in `config.secret_file`; the config with the credentials
    it got (and the pool's `workerConfig` settings it knows applied)."""
    secret = (await asyncio.to_thread(Path(config.secret_file).read_text)).strip()
    body = {
        "workerPoolId": config.task_queue_id,
        "providerId": config.provider_id,
        "workerGroup": config.worker_group,
        "workerId": config.worker_id,
        "workerIdentityProof": {"staticSecret": secret},
    }
    client = QueueClient(config.root_url)
    try:
        answer = await client.worker_manager("POST", "/worker/register", None, body)
    finally:
        await client.close()
    creds = _credentials(answer)
    changes: dict[str, Any] = {
        "client_id": creds.client_id,
        "access_token": creds.access_token,
        "certificate": creds.certificate or "",
    }
    worker_config = answer.get("workerConfig") or {}
    if isinstance(worker_config.get("maxRunTimeLimit"), int):
        changes["max_run_time_limit"] = worker_config["maxRunTimeLimit"]
    expires = _expiry(answer)
    log.info("registered as %s until %s", creds.client_id, answer["expires"])
    registered = Registered(expires, max(1.0, expires - time.time()), str(answer["secret"]))
    return dataclasses.replace(config, **changes), registered


async def keep_registered(
    config: WorkerConfig, client: QueueClient, registered: Registered, current: Any, swap: Any
) -> None:
    """Register again before the credentials expire, for as long as the worker runs: `current()`
    gives the credentials in use, `swap(creds)` puts new ones in their place."""
    while True:
        await asyncio.sleep(max(1.0, registered.expires - time.time() - AHEAD * registered.lifetime))
        body = {
            "workerPoolId": config.task_queue_id,
            "workerGroup": config.worker_group,
            "workerId": config.worker_id,
            "secret": registered.secret,
        }
        try:
            answer = await client.worker_manager("POST", "/worker/reregister", current(), body)
        except Exception as exc:
            log.warning("registering again failed (%s); trying again in %.0f s", exc, RETRY)
            if registered.expires - time.time() > RETRY:
                await asyncio.sleep(RETRY)
                continue
            raise
        registered.expires = _expiry(answer)
        registered.lifetime = max(1.0, registered.expires - time.time())
        registered.secret = str(answer["secret"])
        swap(_credentials(answer))
        log.info("registered again, until %s", answer["expires"])
