"""`taskyard index find|list|insert` against a real server."""

from __future__ import annotations

import json

from taskyard.model import slugid
from tests.cli.helpers import Run


def test_insert_find_and_list(cli: Run) -> None:
    root = f"cli{slugid.nice()[:6].lower().replace('-', 'x').replace('_', 'y')}"
    task_id = slugid.nice()
    shown = cli("index", "insert", f"{root}.builds.latest", task_id, "--rank", "4", "--data", '{"a": 1}')
    assert f"{root}.builds.latest  {task_id}  rank 4" in shown.stdout
    found = json.loads(cli("index", "find", f"{root}.builds.latest", "--json").stdout)
    assert (found["taskId"], found["rank"], found["data"]) == (task_id, 4, {"a": 1})
    lower = cli("index", "insert", f"{root}.builds.latest", slugid.nice(), "--rank", "1").stdout
    assert task_id in lower  # a lower rank leaves the entry as it was, and says so
    cli("index", "insert", f"{root}.other", slugid.nice())
    listing = cli("index", "list", root).stdout
    assert f"{root}.builds." in listing and f"{root}.other" in listing
    assert root in cli("index", "list").stdout  # the root's namespaces
    missing = cli("index", "find", f"{root}.nothing", status=1)
    assert "ResourceNotFound" in missing.stderr or "not found" in missing.stderr.lower()
    bad = cli("index", "insert", "a..b", task_id, status=1)
    assert "namespace" in bad.stderr
    assert "--data" in cli("index", "insert", f"{root}.x", task_id, "--data", "[1]", status=2).stderr
