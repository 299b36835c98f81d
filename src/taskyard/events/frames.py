"""AMQP 0-9-1 frames of a Basic.Publish, encoded as the RabbitMQ bus sends them.

A message is three frames or more: the Basic.Publish method frame (exchange, routing key), the
content header (the body's size and the properties) and the body, split in frames of at most
`max_content` bytes. `Frames.add` appends them to a batch that the bus writes at once.

The bytes are exactly those aiormq's `basic_publish` writes for the same message (pamqp's
marshalling; tests/events/test_frames.py compares them), encoded here for a fraction of its
CPU: the relay publishes every event this way, and the per-message work was most of its cost.
Only the properties the bus sets are encoded: content type, persistence, the CC header, the id.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

FRAME_END = b"\xce"
_FRAME = struct.Struct(">BHI")  # type, channel, payload size
_METHOD, _HEADER, _BODY = 1, 2, 3
_LONG = struct.Struct(">I")
# Basic (60) Publish (40), then the reserved ticket (0).
_PUBLISH = struct.pack(">HHH", 60, 40, 0)
# Class Basic (60), weight 0, body size; then the property flags.
_CONTENT = struct.Struct(">HHQH")
_CONTENT_TYPE, _HEADERS, _DELIVERY_MODE, _MESSAGE_ID = 1 << 15, 1 << 13, 1 << 12, 1 << 7
# What the broker (and pamqp) accepts as an exchange name.
_EXCHANGE = re.compile(r"[a-zA-Z0-9-_.:@#,/+ ]{0,127}")


def shortstr(text: str) -> bytes:
    data = text.encode()
    if len(data) > 255:
        raise ValueError(f"longer than 255 bytes: {text[:40]!r}...")
    return bytes((len(data),)) + data


def _cc_table(cc: Sequence[str]) -> bytes:
    """The headers table `{"CC": [...]}`: an array of long strings."""
    items = b"".join(b"S" + _LONG.pack(len(data)) + data for data in (key.encode() for key in cc))
    entry = b"\x02CCA" + _LONG.pack(len(items)) + items
    return _LONG.pack(len(entry)) + entry


class Frames:
    """A batch of publishes on one channel, as the bytes to write."""

    def __init__(self, channel: int, max_content: int, *, content_type: str, delivery_mode: int) -> None:
        if max_content < 1:
            raise ValueError(f"max_content must be positive, not {max_content}")
        self.channel = channel
        self.max_content = max_content
        self._content_type = shortstr(content_type)
        self._delivery_mode = bytes((delivery_mode,))
        self._exchanges: dict[str, bytes] = {}  # name -> the method frame's payload up to the key
        self._parts: list[bytes] = []
        self.count = 0

    def add(
        self, exchange: str, routing_key: str, body: bytes, *, cc: Sequence[str], message_id: str
    ) -> None:
        if len(routing_key) > 255:  # aiormq's check, before any byte is sent
            raise ValueError("Routing key too long (max 255 bytes)")
        head = self._exchanges.get(exchange)
        if head is None:
            if not _EXCHANGE.fullmatch(exchange):
                raise ValueError(f"not an exchange name: {exchange!r}")
            head = self._exchanges[exchange] = _PUBLISH + shortstr(exchange)
        method = head + shortstr(routing_key) + b"\x00"  # neither mandatory nor immediate
        flags = _CONTENT_TYPE | _DELIVERY_MODE | _MESSAGE_ID
        if cc:
            flags |= _HEADERS
            properties = self._content_type + _cc_table(cc) + self._delivery_mode + shortstr(message_id)
        else:
            properties = self._content_type + self._delivery_mode + shortstr(message_id)
        size = len(body)
        header = _CONTENT.pack(60, 0, size, flags) + properties
        channel, parts = self.channel, self._parts
        parts.append(_FRAME.pack(_METHOD, channel, len(method)))
        parts.append(method)
        parts.append(FRAME_END + _FRAME.pack(_HEADER, channel, len(header)))
        parts.append(header)
        if size <= self.max_content:
            if size:
                parts.append(FRAME_END + _FRAME.pack(_BODY, channel, size))
                parts.append(body)
        else:
            for start in range(0, size, self.max_content):
                chunk = body[start : start + self.max_content]
                parts.append(FRAME_END + _FRAME.pack(_BODY, channel, len(chunk)))
                parts.append(chunk)
        parts.append(FRAME_END)
        self.count += 1

    def payload(self) -> bytes:
        return b"".join(self._parts)
