"""The frames the RabbitMQ bus writes for a batch are byte for byte those aiormq's `basic_publish`
writes for each of its messages (pamqp's marshalling of the same publish, header and body)."""

from __future__ import annotations

import pamqp.frame
import pytest
from aiormq import spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from taskyard.events.frames import Frames


def as_aiormq_writes(
    channel: int, max_content: int, exchange: str, key: str, body: bytes, cc: list[str], message_id: str
) -> bytes:
    """What `Channel.basic_publish` queues for one message, as the bus called it."""
    properties = spec.Basic.Properties(
        content_type="application/json",
        delivery_mode=2,
        headers={"CC": list(cc)} if cc else None,
        message_id=message_id,
    )
    frames: list[object] = [
        spec.Basic.Publish(exchange=exchange, routing_key=key, mandatory=False, immediate=False),
        ContentHeader(properties=properties, body_size=len(body)),
    ]
    if body and len(body) < max_content:  # aiormq's `_split_body`
        frames.append(ContentBody(body))
    elif body:
        frames += [ContentBody(body[i : i + max_content]) for i in range(0, len(body), max_content)]
    return b"".join(pamqp.frame.marshal(frame, channel) for frame in frames)  # type: ignore[arg-type]


CASES = [
    # exchange, routing key, body, CC
    ("exchange/taskcluster-queue/v1/task-pending", "primary.abc.0._._.p.w.s.abc._", b'{"a":1}', []),
    ("exchange/taskcluster-queue/v1/task-completed", "primary.x", b'{"status":{}}', ["route.index.a.b"]),
    ("v1/queue:task-pending", "k", b"{}", ["route.a", "route.\u00e9t\u00e9", "route." + "x" * 300]),
    ("", "", b"", []),  # the default exchange, an empty body: no body frame
    ("a.b", "k" * 255, b"x" * 99, ["r"]),  # the body exactly one frame's room
    ("a.b", "k.\u00fc", b"y" * 100, []),  # exactly one frame's room plus one: split
    ("a.b", "k", bytes(range(256)) * 3, ["c"] * 40),  # several body frames
]


@pytest.mark.parametrize(("exchange", "key", "body", "cc"), CASES)
@pytest.mark.parametrize("channel", [1, 2, 65535])
def test_a_message_is_the_bytes_aiormq_writes(
    exchange: str, key: str, body: bytes, cc: list[str], channel: int
) -> None:
    frames = Frames(channel, 99, content_type="application/json", delivery_mode=2)
    frames.add(exchange, key, body, cc=cc, message_id="0123abcd-7")
    assert frames.count == 1
    assert frames.payload() == as_aiormq_writes(channel, 99, exchange, key, body, cc, "0123abcd-7")


def test_a_batch_is_its_messages_one_after_another() -> None:
    frames = Frames(3, 131064, content_type="application/json", delivery_mode=2)
    expected = b""
    for n, (exchange, key, body, cc) in enumerate(CASES * 3):
        frames.add(exchange, key, body, cc=cc, message_id=f"id-{n}")
        expected += as_aiormq_writes(3, 131064, exchange, key, body, cc, f"id-{n}")
    assert frames.count == len(CASES) * 3
    assert frames.payload() == expected


def test_what_aiormq_refuses_is_refused_before_anything_is_added() -> None:
    frames = Frames(1, 1000, content_type="application/json", delivery_mode=2)
    with pytest.raises(ValueError, match="Routing key too long"):
        frames.add("x", "k" * 256, b"{}", cc=[], message_id="m")
    with pytest.raises(ValueError, match="255 bytes"):
        frames.add("x", "\u00e9" * 200, b"{}", cc=[], message_id="m")
    with pytest.raises(ValueError, match="not an exchange name"):
        frames.add("bad!name", "k", b"{}", cc=[], message_id="m")
    assert frames.count == 0 and frames.payload() == b""
