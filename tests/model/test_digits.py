"""Whole numbers from client text: ASCII digits only, with a bounded length."""

from __future__ import annotations

import pytest

from taskyard.model import digits


@pytest.mark.parametrize("text", ["0", "7", "007", "1234567890"])
def test_ascii_digits_are_read(text: str) -> None:
    assert digits.is_digits(text)
    assert digits.parse_whole(text, 10) == int(text)


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "1\n", "+1", "-1", "1.0", "1e3", "0x1", "\u00b2", "\u0663", "\uff11", "1\u00b2"],
)
def test_anything_else_is_not(text: str) -> None:
    assert not digits.is_digits(text)
    assert digits.parse_whole(text, 10) is None


def test_too_many_digits_are_not_read() -> None:
    assert digits.parse_whole("1" * 11, 10) is None
    assert digits.parse_whole("1" * 5000, 10) is None  # int() itself would raise
    assert digits.is_digits("1" * 5000)
