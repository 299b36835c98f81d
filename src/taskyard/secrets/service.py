"""The secrets service's shared machinery: the `Secrets` object."""

from __future__ import annotations

from taskyard.model import dates
from taskyard.model.types import Clock
from taskyard.secrets.crypto import Sealer
from taskyard.storage.port import Storage

SWEEP_BATCH = 500  # expired secrets deleted per transaction
RESEAL_BATCH = 100  # values re-sealed under the current key per transaction


class Secrets:
    """Everything the secrets operations share: storage, the clock, and the sealer holding the
    keys derived from the deployment's secret key (and from the old one, while values it sealed
    remain)."""

    def __init__(
        self,
        storage: Storage,
        *,
        secret_key: str,
        old_secret_key: str = "",
        clock: Clock = dates.now_ms,
        sweep_batch: int = SWEEP_BATCH,
        reseal_batch: int = RESEAL_BATCH,
    ) -> None:
        self.storage = storage
        self.clock = clock
        self.sealer = Sealer.from_secret_keys(secret_key, old_secret_key)
        self.sweep_batch = sweep_batch
        self.reseal_batch = reseal_batch
        self.resealed_all = False  # no value is left under the old key (said once, in the log)

    def __repr__(self) -> str:  # never the keys
        return f"Secrets({self.storage.url_for_humans})"
