"""Whole numbers read from client text: query strings, headers, path segments, signed URLs.

Python's `str.isdigit()` is true for '²', which `int()` refuses; `int()` itself reads '٣', ' 7\n'
and '+7', and raises past 4300 digits. Client text is therefore matched against ASCII digits,
with a bounded length, before `int()` sees it.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+")


def is_digits(text: str) -> bool:
    """Whether `text` is one or more ASCII digits, and nothing else."""
    return _DIGITS.fullmatch(text) is not None


def parse_whole(text: str, max_digits: int) -> int | None:
    """`text` as a whole number if it is 1 to `max_digits` ASCII digits; None otherwise."""
    if len(text) > max_digits or not is_digits(text):
        return None
    return int(text)
