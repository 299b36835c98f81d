"""What the API index page (`/api`) and the web UI's APIs page both say: the APIs' version in their
paths, and the command line's first steps against a deployment."""

from __future__ import annotations

API_VERSION = "v1"  # every service's path: /api/<service>/v1/


def command_line(root_url: str) -> str:
    """The command line's first steps against the deployment at `root_url` (plain text)."""
    return f"""export TASKCLUSTER_ROOT_URL={root_url}
export TASKCLUSTER_CLIENT_ID=...      # the root credentials taskyard up printed, or a client's
export TASKCLUSTER_ACCESS_TOKEN=...
taskyard task create task.yml         # a task from YAML or JSON
taskyard task log TASK_ID -f          # its log, live
taskyard client create ID --scope S   # a client for a worker or a user
taskyard --help                       # every command
"""
