"""The index's pure rules: paths, namespaces, ranks, and what a completed task is indexed as."""

from __future__ import annotations

import re

import pytest

from taskyard.model import dates
from taskyard.model.errors import InputError
from taskyard.model.index_paths import (
    DAY_MS,
    INDEX_PATH_PARAM,
    NAMESPACE_PARAM,
    YEAR_MS,
    check_rank,
    entry_of_task,
    is_path,
    join,
    namespace_expiry,
    namespace_levels,
    paths_of_routes,
    split,
)


@pytest.mark.parametrize("path", ["a", "a.b.c", "x-y_z.!~*'()%20", "a" * 255])
def test_valid_paths(path: str) -> None:
    assert is_path(path) and re.fullmatch(INDEX_PATH_PARAM, path) and re.fullmatch(NAMESPACE_PARAM, path)


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "a b", "a/b", "a" * 256, "é"])
def test_invalid_paths(path: str) -> None:
    assert not is_path(path) and not re.fullmatch(INDEX_PATH_PARAM, path)


def test_the_root_namespace_is_empty() -> None:
    assert re.fullmatch(NAMESPACE_PARAM, "") and split("latest") == ("", "latest")
    assert split("a.b.c") == ("a.b", "c") and join("a.b", "c") == "a.b.c" and join("", "c") == "c"


def test_a_namespace_stands_for_each_of_its_prefixes_root_first() -> None:
    assert namespace_levels("a.b.c") == [("", "a"), ("a", "b"), ("a.b", "c")]
    assert namespace_levels("") == []


def test_a_namespace_expires_at_the_midnight_after_its_entry() -> None:
    noon = dates.parse_iso("2030-01-02T12:00:00.000Z")
    assert namespace_expiry(noon) == dates.parse_iso("2030-01-03T00:00:00.000Z")
    midnight = dates.parse_iso("2030-01-02T00:00:00.000Z")
    assert namespace_expiry(midnight) == midnight + DAY_MS


@pytest.mark.parametrize(("value", "rank"), [(0, 0), (5.0, 5), (-(2**31), -(2**31)), (2**31 - 1, 2**31 - 1)])
def test_ranks(value: float, rank: int) -> None:
    assert check_rank(value) == rank


@pytest.mark.parametrize("value", [1.5, 2**31, -(2**31) - 1, "1", True, None])
def test_bad_ranks_name_the_field(value: object) -> None:
    with pytest.raises(InputError, match="rank"):
        check_rank(value)


def test_only_valid_index_routes_are_indexed_each_once() -> None:
    routes = ["index.a.b", "index.a..b", "other.x", "index.a.b", "index.c", 7, "index."]
    assert paths_of_routes(routes) == ["a.b", "c"]
    assert paths_of_routes(None) == []


def test_a_completed_task_is_indexed_by_its_extra_index_with_defaults() -> None:
    plain = entry_of_task("T", {}, expires=1000, created=10)
    assert plain is not None and (plain.rank, plain.data, plain.expires) == (0, {}, 1000)
    assert entry_of_task("T", {}, expires=0, created=10).expires == 10 + YEAR_MS  # type: ignore[union-attr]
    given = {"extra": {"index": {"rank": 3, "data": {"a": 1}, "expires": "2030-01-01T00:00:00.000Z"}}}
    full = entry_of_task("T", given, expires=1000, created=10)
    assert full is not None and (full.rank, full.data) == (3, {"a": 1})
    assert full.expires == dates.parse_iso("2030-01-01T00:00:00.000Z")
    for bad in ({"rank": "3"}, {"rank": 1.5}, {"data": []}, {"expires": "soon"}, {"expires": 5}):
        assert entry_of_task("T", {"extra": {"index": bad}}, expires=1000, created=10) is None
