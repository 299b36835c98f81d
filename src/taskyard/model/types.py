"""Shared type aliases. Imports nothing of ours."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JSON = Any
JSONObject = dict[str, Any]
TaskId = str
TaskGroupId = str
TaskQueueId = str
Millis = int  # milliseconds since the Unix epoch, UTC: how every time is stored
Clock = Callable[[], Millis]
