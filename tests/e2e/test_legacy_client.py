"""TaskCluster's Python client of the seeds' era (1.3.5) against a real server.

The later APIs (the scheduler, pollTaskUrls) are tested with it in their own modules; this one
proves the client itself works here: its Hawk signatures (mohawk 0.3) are accepted and its
`baseUrl` form of addressing a service reaches the queue.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Server
from tests.e2e.helpers import definition, legacy_options, slug
from tests.legacy_client import legacy_python, run_legacy

__all__ = ["legacy_python"]


def test_the_legacy_client_creates_and_reads_a_task(server: Server, legacy_python: Path, tq: str) -> None:
    task_id = slug()
    provisioner_id, worker_type = tq.split("/")
    body = definition(tq)
    del body["taskQueueId"]
    body.update(provisionerId=provisioner_id, workerType=worker_type)
    answer = run_legacy(
        legacy_python,
        """
        queue = taskcluster.Queue(options)
        created = queue.createTask(options["taskId"], options["task"])
        result = {"ping": queue.ping(), "created": created, "task": queue.task(options["taskId"])}
        """,
        options={**legacy_options(server, "queue"), "taskId": task_id, "task": body},
    )
    assert answer["ping"]["alive"] is True
    assert answer["created"]["status"]["state"] == "pending"
    assert answer["task"]["workerType"] == worker_type


def test_the_legacy_client_is_refused_with_a_wrong_token(server: Server, legacy_python: Path) -> None:
    answer = run_legacy(
        legacy_python,
        """
        queue = taskcluster.Queue(options)
        try:
            queue.createTask(options["taskId"], {})
            result = "accepted"
        except taskcluster.exceptions.TaskclusterAuthFailure as error:
            result = error.status_code
        """,
        options={
            **legacy_options(server, "queue"),
            "credentials": {"clientId": "static/taskcluster/root", "accessToken": "wrong"},
            "taskId": slug(),
        },
    )
    assert answer == 401
