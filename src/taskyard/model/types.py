"""Shared type aliases. Imports nothing of ours.

JSON: `JSONValue` is anything a JSON document parses to, and `JSONObject` a JSON object of no
fixed shape (a task's payload and extra, an artifact's details, a request body before its schema
is checked). A shape that is fixed is a TypedDict next to the code that builds it (the task
status in `model/status.py`, a claim in `queue/claims.py`, ...). `LooseJSON` is a JSON object
whose readers index it without narrowing: the worker's payload parser and the event profiles,
which check what they read as they go. It never crosses the API <-> service boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
JSONObject: TypeAlias = dict[str, JSONValue]
LooseJSON: TypeAlias = dict[str, Any]
TaskId = str
TaskGroupId = str
TaskQueueId = str
Millis = int  # milliseconds since the Unix epoch, UTC: how every time is stored
Clock = Callable[[], Millis]
