"""One live owner per directory: an exclusive `flock` on a lock file in it, held for life.

The owner keeps the lock file open with `flock(LOCK_EX)` on it for as long as it runs. The
kernel drops the lock the moment the last descriptor on it closes, however the owner ends
(SIGKILL and crashes included), so a lock is never stale and nothing has to clean it up. The
file itself stays: deleting it would let a newcomer lock a fresh file of the same name while
the owner still holds the old one. After locking, the owner writes who it is into the file
(`key=value` lines: its pid, what it is, where it listens), so that a process refused can
name it; what the file says means nothing while nobody holds it.

A child given the descriptor (`pass_fds`) shares the lock: it stays held until parent and child
are both gone.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

# The owner writes its record just after it locks: a reader finding the file empty reads again.
_RECORD_WAIT = 1.0


class InUse(Exception):
    """Another live process holds the lock; `owner` is what it wrote in the lock file."""

    def __init__(self, path: Path, owner: dict[str, str], *, what: str, flag: str) -> None:
        self.path = path
        self.owner = owner
        self.what = what
        self.flag = flag
        super().__init__(self.message)

    @property
    def pid(self) -> int | None:
        pid = self.owner.get("pid", "")
        return int(pid) if pid.isdigit() else None

    @property
    def message(self) -> str:
        """Two lines: who holds what, and what to do about it."""
        holder = self.owner.get("process", "another process")
        details = [f"pid {self.pid}" if self.pid is not None else "pid unknown"]
        if self.owner.get("url"):
            details.append(f"at {self.owner['url']}")
        where = f"{self.what} {os.path.abspath(self.path.parent)}"
        if self.pid is not None and not alive(self.pid):
            return (
                f"{where} is in use by {holder} ({', '.join(details)}), which has exited, but a "
                f"process it started still holds the lock\n"
                f"wait for that one to end, or give this one another {self.flag}"
            )
        return (
            f"{where} is in use by {holder} ({', '.join(details)})\n"
            f"stop that one first, or give this one another {self.flag}"
        )


class Lock:
    """A held lock: released when `release()` is called or the process ends."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def fileno(self) -> int:
        """The descriptor that holds the lock: pass it to a child that should hold it too."""
        return self._fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(path: Path, *, what: str, flag: str, **record: str) -> Lock:
    """Lock `path` (made with its directory if need be) and write this process's `record` in it.

    InUse if a live process holds it; `what` ("the work directory") and `flag` ("--work-dir")
    word its message.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            owner = _read_record(fd)
        finally:
            os.close(fd)
        raise InUse(path, owner, what=what, flag=flag) from None
    except BaseException:
        os.close(fd)
        raise
    text = "".join(f"{key}={value}\n" for key, value in {"pid": str(os.getpid()), **record}.items())
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)
    return Lock(path, fd)


def _read_record(fd: int) -> dict[str, str]:
    give_up = time.monotonic() + _RECORD_WAIT
    while True:
        text = os.pread(fd, 4096, 0).decode(errors="replace")
        record = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        if "pid" in record or time.monotonic() > give_up:
            return record
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
