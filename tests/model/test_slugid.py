"""Slugids (model/slugid.py): 22 URL-safe base64 characters of a v4 UUID, made at random or
derived from a name (first bit clear: never a leading `-`), and the pattern every taskId and
taskGroupId is checked by."""

from __future__ import annotations

import base64
import uuid

from hypothesis import given
from hypothesis import strategies as st

from taskyard.model import slugid
from tests.model.properties import PROPERTIES


def as_uuid(value: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=="))


def test_random_slugids_are_nice_v4_uuids() -> None:
    made = [slugid.nice() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for value in made:
        assert slugid.is_valid(value) and len(value) == 22 and not value.startswith("-")
        decoded = as_uuid(value)
        assert decoded.version == 4 and decoded.variant == uuid.RFC_4122
        assert base64.urlsafe_b64encode(decoded.bytes).decode()[:22] == value


@PROPERTIES
@given(name=st.text(max_size=40), other=st.text(max_size=40))
def test_a_derived_slugid_is_valid_and_the_same_for_the_same_name(name: str, other: str) -> None:
    value = slugid.derived(name)
    assert slugid.is_valid(value) and slugid.derived(name) == value
    assert as_uuid(value).version == 4 and as_uuid(value).variant == uuid.RFC_4122
    assert (slugid.derived(other) == value) is (other == name)


def v4(raw: bytes) -> bytes:
    """`raw` with the version and variant bits of a v4 UUID."""
    made = bytearray(raw)
    made[6] = (made[6] & 0x0F) | 0x40
    made[8] = (made[8] & 0x3F) | 0x80
    return bytes(made)


uuid_bytes = st.binary(min_size=16, max_size=16)


@PROPERTIES
@given(raw=st.one_of(uuid_bytes, uuid_bytes.map(v4)))
def test_the_pattern_takes_exactly_the_v4_uuids(raw: bytes) -> None:
    # As TaskCluster's: any v4 UUID, a leading `-` included (only the ones taskyard makes are nice).
    value = base64.urlsafe_b64encode(raw).decode()[:22]
    decoded = uuid.UUID(bytes=raw)
    assert slugid.is_valid(value) is (decoded.version == 4 and decoded.variant == uuid.RFC_4122)


@PROPERTIES
@given(value=st.text(max_size=30))
def test_anything_else_is_not_a_slugid(value: str) -> None:
    if slugid.is_valid(value):
        assert len(value) == 22 and as_uuid(value).version == 4
    assert not slugid.is_valid(value + "A") and not slugid.is_valid(value.encode())


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@PROPERTIES
@given(raw=uuid_bytes.map(v4), at=st.integers(0, 21))
def test_a_slugid_with_a_character_changed_is_valid_only_if_it_is_still_one(raw: bytes, at: int) -> None:
    value = base64.urlsafe_b64encode(raw).decode()[:22]
    for char in ALPHABET:
        changed = value[:at] + char + value[at + 1 :]
        decoded = base64.urlsafe_b64decode(changed + "==")  # drops the last character's spare bits
        same = base64.urlsafe_b64encode(decoded).decode()[:22] == changed
        v4_again = uuid.UUID(bytes=decoded).version == 4 and uuid.UUID(bytes=decoded).variant == uuid.RFC_4122
        assert slugid.is_valid(changed) is (same and v4_again), changed
