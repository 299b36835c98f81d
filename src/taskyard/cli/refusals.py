"""What the command line prints when the server says no: one or two lines, and what to check.

TaskCluster's error bodies carry a message meant for a log: the reason, then a block of request
details after `---`, and for a 403 the missing scopes and the whole scope expression as JSON,
twice. People get the reason on one line, with the credential to check for a 401; `--verbose`
prints the server's message as it came.
"""

from __future__ import annotations

import json
import re

from taskyard.model.client_errors import Refused
from taskyard.model.client_errors import scope_expression as expression

# `URL parameter taskId 'abc' must match ^...$`: what the queue says of an id that is not a slugid.
_BAD_PARAMETER = re.compile(r"URL parameter (\w+) '(.*)' must match \^.*\$", re.DOTALL)
SLUGID_RULE = "22 characters of A-Z a-z 0-9 - _, like `taskyard slugid` prints"
# The form of an id (the rule above): one of it that the server refuses is one no task can have.
SLUGID_FORM = re.compile(r"[A-Za-z0-9_-]{22}")
# What each id names, for `... does not exist`.
NAMED = {"taskId": "task", "taskGroupId": "task group", "taskGraphId": "task graph"}
QUEUE_RULE = (
    "provisionerId/workerType: 1-38 of A-Z a-z 0-9 - _, then / and 1-38 of a-z 0-9 -, "
    "starting with a letter, not ending with -"
)
# The URL parameters whose pattern the rule says in words; the others' pattern is shown as it is.
RULES = {
    "taskId": SLUGID_RULE,
    "taskGroupId": SLUGID_RULE,
    "taskGraphId": SLUGID_RULE,
    "taskQueueId": QUEUE_RULE,
    "workerPoolId": QUEUE_RULE,
}
_CODE_BLOCK = re.compile(r"```\s*(.*?)```", re.DOTALL)


def explain(exc: Refused, client_id: str, *, verbose: bool = False) -> str:
    """The refusal for people: its reason, and for a 401 which credential to check."""
    if verbose:
        return exc.message.rstrip()
    reason = summary(exc)
    if exc.status == 401:
        return f"{reason}\nthe server refused client {client_id!r}: {credential_hint(exc.message)}"
    return reason


def summary(exc: Refused) -> str:
    """The message without its `---` details block; a scope expression on one line; a list of
    problems (a 400's `body has N problems:`) whole, one per line."""
    message = exc.message.split("\n---", 1)[0].strip()
    bad = _BAD_PARAMETER.fullmatch(message)
    if bad is not None and bad.group(1) in RULES:
        name, value = bad.group(1), bad.group(2)
        if name in NAMED and SLUGID_FORM.fullmatch(value):
            # The form of an id, not a slugid the queue gives: no such task (group, graph) exists.
            return f"{NAMED[name]} {value} does not exist"
        return not_an_id(name, value)
    if exc.code == "InsufficientScopes":
        return _missing_scopes(message)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and all(line.startswith("- ") for line in lines[1:]):
        return "\n".join(lines)  # `body has 3 problems:`, then every one, as the web form lists them
    return " ".join(lines[:2]) or f"HTTP {exc.status}"


def not_an_id(name: str, value: str) -> str:
    """`'abc' is not a taskId (22 characters of ...)`: the rule of `name`'s pattern in words."""
    return f"{value!r} is not a {name} ({RULES.get(name, SLUGID_RULE)})"


def credential_hint(message: str) -> str:
    """Which TASKCLUSTER_* variable (or its flag) the refusal points at."""
    if "not found" in message or "disabled" in message or "expired" in message:
        return "check TASKCLUSTER_CLIENT_ID (or --client-id)"
    if "certificate" in message:
        return "check TASKCLUSTER_CERTIFICATE (or --certificate), or unset it for permanent credentials"
    if "Bad mac" in message:
        return "its access token is wrong: check TASKCLUSTER_ACCESS_TOKEN (or --access-token)"
    if "Stale timestamp" in message:
        return "this machine's clock and the server's differ by more than 15 minutes"
    return "check TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (or their flags)"


def _missing_scopes(message: str) -> str:
    """`Client ID x does not have sufficient scopes and is missing: a and (b or c)`."""
    head = message.split("\n", 1)[0].rstrip(": ")
    blocks = _CODE_BLOCK.findall(message)
    if not blocks:
        return head
    try:
        missing = json.loads(blocks[0])
    except ValueError:
        missing = blocks[0].strip()  # a single scope, as it is
    if "is missing" not in head:  # anonymous: no client to name
        return f"{head}: {expression(missing)}"
    head = head.removesuffix(" the following scopes").removesuffix(" and is missing")
    return f"{head}; it lacks {expression(missing)}"
