"""The event-bus port: publish the queue's events to topic exchanges; subscribe by pattern.

A bus takes the stored events (`Message`), maps each through its profiles into `Envelope`s
(full exchange name, routing key, CCs, body) and sends those. Patterns follow AMQP topic rules:
words separated by `.`, `*` matches one word, `#` any number. An adapter delivers each envelope
to every subscription whose exchange is the envelope's and whose pattern matches its routing key
or one of its CC keys, at most once per subscription.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from taskyard.model.messages import Message
from taskyard.model.types import LooseJSON


@dataclass(frozen=True)
class Envelope:
    """One message as sent: `exchange` is the full name (`exchange/taskcluster-queue/v1/task-pending`)."""

    exchange: str
    routing_key: str
    body: LooseJSON
    cc: list[str] = field(default_factory=list)


Handler = Callable[[Envelope], Awaitable[None] | None]


# The longest routing key or binding pattern AMQP carries, in bytes.
MAX_PATTERN_BYTES = 255
_PATTERN_RULE = "words are separated by single dots; `*` stands for one word and `#` for any number"


class BadPattern(ValueError):
    """A binding pattern that breaks AMQP's topic rules; the message says which word and why."""

    def __init__(self, pattern: str, problem: str) -> None:
        super().__init__(f"binding pattern {pattern!r} is not valid: {problem} ({_PATTERN_RULE})")
        self.message = str(self)


def check_pattern(pattern: str) -> str:
    """`pattern` if it is an AMQP topic binding pattern, else BadPattern naming the first problem.

    Every word must be non-empty (no leading, trailing or doubled dot), and a wildcard stands alone
    as its word: `a*` or `#b` would be taken literally by RabbitMQ, which is never what was meant.
    """
    if pattern == "":
        raise BadPattern(pattern, "it is empty; `#` matches every routing key")
    if len(pattern.encode()) > MAX_PATTERN_BYTES:
        raise BadPattern(pattern, f"it is longer than {MAX_PATTERN_BYTES} bytes")
    for number, word in enumerate(pattern.split("."), start=1):
        if word == "":
            raise BadPattern(pattern, f"word {number} is empty")
        if word not in ("*", "#") and ("*" in word or "#" in word):
            raise BadPattern(pattern, f"word {number} ({word!r}) mixes a wildcard with other characters")
        if any(ord(c) < 32 or c == "\x7f" for c in word):
            raise BadPattern(pattern, f"word {number} holds a control character")
    return pattern


class BusUnavailable(Exception):
    """The bus cannot take messages now (broker down, refusing us, or not confirming).

    Nothing of the batch counts as published: the relay keeps the events and tries again once
    `wait_ready()` returns.
    """


class EventBus(Protocol):
    async def publish(self, messages: Sequence[Message]) -> None:
        """Publish `messages` in order; return once the bus has accepted them all, else raise."""

    async def wait_ready(self) -> None:
        """Return once the bus can take messages again (at once for a bus that always can)."""

    def subscribe(self, exchange: str, pattern: str, handler: Handler) -> Callable[[], None]:
        """Call `handler` for matching envelopes; answer a function that unsubscribes.

        BadPattern for a pattern that breaks the topic rules (`check_pattern`)."""

    def consume(
        self, queue: str, bindings: Sequence[tuple[str, str]], handler: Handler
    ) -> Callable[[], None]:
        """Call `handler` for every envelope routed to the durable queue `queue`, bound to each
        (exchange, pattern) of `bindings`; answer a function that stops consuming.

        On RabbitMQ the queue outlives this process: what arrives while nobody consumes waits for
        the next consumer, and a message is acknowledged only once `handler` returned (a handler
        that raises gets it again later). Several processes consuming one queue share its
        messages. In process, it is `subscribe` for each binding. BadPattern as `subscribe`."""

    async def close(self) -> None:
        """Stop delivering."""
