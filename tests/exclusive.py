"""One process at a time for what tests build once in a shared place and keep (the legacy client's
virtualenv, the JavaScript client's node_modules).

The suite runs in several processes at once (pytest-xdist), and other checkouts' suites may build
the same thing: two builders in one directory leave it broken (`venv --clear` and `npm ci` each
empty it first). `exclusive(target)` holds an advisory lock on a file of the system's temporary
directory named after `target` until the block ends; the builder checks again, inside the block,
whether the thing is already there.
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Wait until no other process holds `target`'s lock, then hold it for the block."""
    key = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / f"taskyard-tests-{key}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
