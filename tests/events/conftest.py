"""The events tests' private RabbitMQ node (tests/events/rabbit.py), made once per session."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.events.rabbit import PrivateRabbit, private_rabbit_unavailable


@pytest.fixture(scope="session")
def private_rabbit() -> Iterator[PrivateRabbit]:
    """A private RabbitMQ node for the whole session, running when a test gets it."""
    reason = private_rabbit_unavailable()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason + " (CI=true: RabbitMQ tests must run)")
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="ty-rabbit-"))
    node = PrivateRabbit(base)
    node.prepare()
    node.start()
    yield node
    with contextlib.suppress(Exception):
        node.stop()
    shutil.rmtree(base, ignore_errors=True)
