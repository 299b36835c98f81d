"""Paging tokens and limits (model/paging.py): what the server hands out comes back, and nothing a
client sends instead gets further than a 400. Properties (hypothesis); tests/api/test_paging.py
pages through the lists themselves."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskyard.model import paging
from taskyard.model.errors import InputError, InvalidRequestArguments
from tests.model.properties import PROPERTIES

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)
# What a client may send as a token: any text, or a well-formed token of any JSON value, often
# shaped like the server's own (an offset `{"o": ...}`, a key `{"k": [...]}`) with odd values.
tokens = st.one_of(
    st.text(max_size=60),
    json_values.map(paging.encode),
    st.one_of(scalars, json_values).map(lambda v: paging.encode({"o": v})),
    st.lists(scalars, min_size=1, max_size=3).map(lambda v: paging.encode({"k": v})),
)
key_parts = st.one_of(
    st.integers(0, paging.MAX_TOKEN_INT), st.text(max_size=40).filter(lambda s: "\x00" not in s)
)


@PROPERTIES
@given(value=json_values)
def test_a_token_is_url_safe_and_decodes_to_what_was_encoded(value: object) -> None:
    token = paging.encode(value)
    assert re.fullmatch(r"[A-Za-z0-9_-]*", token)
    assert paging.decode(token) == value


@PROPERTIES
@given(token=tokens)
def test_any_token_is_read_or_refused_with_a_400(token: str) -> None:
    query = paging.Query(token=token)
    try:
        found = paging.offset(query)
    except InputError as refused:
        assert refused.status == 400
    else:
        assert type(found) is int and 0 <= found <= paging.MAX_TOKEN_INT
    default: list[object] = [0, ""]
    try:
        key = paging.after(query, 2, default)
    except InputError as refused:
        assert refused.status == 400
    else:
        assert [type(k) for k in key] == [int, str]


@PROPERTIES
@given(start=st.integers(0, 10**9), limit=st.integers(1, paging.MAX_LIMIT), found=st.integers(0, 2000))
def test_an_offset_token_leads_to_the_next_page(start: int, limit: int, found: int) -> None:
    token = paging.offset_token(range(found), start, limit)
    assert (token is None) is (found <= limit)
    if token is not None:
        assert paging.offset(paging.Query(token=token)) == start + limit
    assert paging.more(token) == ({} if token is None else {"continuationToken": token})


@PROPERTIES
@given(key=st.lists(key_parts, min_size=1, max_size=4), limit=st.integers(1, 5), found=st.integers(0, 10))
def test_a_keyset_token_gives_back_the_last_key(key: list[object], limit: int, found: int) -> None:
    token = paging.keyset_token(range(found), key, limit)
    assert (token is None) is (found <= limit)
    if token is not None:
        default: list[object] = [0 if type(k) is int else "" for k in key]
        assert paging.after(paging.Query(token=token), len(key), default) == key
        with pytest.raises(InputError):  # the same token read by a list keyed otherwise
            paging.after(paging.Query(token=token), len(key) + 1, [*default, 0])


@PROPERTIES
@given(
    raw=st.one_of(
        st.text(max_size=15), st.integers(0, 2000).map(str), st.text(alphabet="0123456789", max_size=15)
    ),
    max_limit=st.integers(1, paging.MAX_LIMIT),
)
def test_a_limit_is_a_whole_number_held_within_bounds(raw: str, max_limit: int) -> None:
    try:
        query = paging.parse({"limit": raw, "continuationToken": "t"}, max_limit=max_limit)
    except InvalidRequestArguments:
        assert not re.fullmatch(r"[0-9]+", raw)
        return
    assert re.fullmatch(r"[0-9]+", raw)
    assert 1 <= query.limit <= max_limit
    if len(raw) <= paging.LIMIT_DIGITS:
        assert query.limit == max(1, min(int(raw), max_limit))
    assert query.token == "t"
