"""Why `serve` or `up` could not start, told in a line or two (here, not in `serve`, so that the
command line can catch it without importing the server)."""

from __future__ import annotations

STARTUP_FAILURE = 3  # the exit status when the server cannot start (`StartupFailed` and the rest)


class StartupFailed(Exception):
    """The server cannot start for a reason the operator can fix: `message` says what is wrong
    and what to do, in a line or two (printed without a traceback; exit STARTUP_FAILURE)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
