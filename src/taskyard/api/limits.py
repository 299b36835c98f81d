"""A request's declared size, read strictly: Content-Length is ASCII digits, or the request is a 400.

Servers in front of the app (uvicorn's h11) refuse most malformed values themselves; the app does
not count on it.
"""

from __future__ import annotations

from taskyard.model import digits
from taskyard.model.errors import InputError, InputTooLarge

MAX_LENGTH_DIGITS = 18  # past any limit, and short of int()'s trouble


def check_content_length(value: str | None, limit: int, what: str) -> None:
    """400 unless a Content-Length (None: not sent) is a whole number; 413 if it exceeds `limit`."""
    if value is None:
        return
    if not digits.is_digits(value):
        raise InputError(f"the Content-Length header must be a whole number of bytes (got {value[:40]!r})")
    declared = digits.parse_whole(value, MAX_LENGTH_DIGITS)
    if declared is None or declared > limit:
        shown = value if declared is not None else f"more than 10^{MAX_LENGTH_DIGITS}"
        raise InputTooLarge(f"{what} is {shown} bytes; at most {limit} are accepted")
