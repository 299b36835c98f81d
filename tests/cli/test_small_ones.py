"""The command line's small ones: an id of a taskId's form that no task has, `taskyard api`'s
help and the events service, and `completion` with a shell it does not support."""

from __future__ import annotations

from taskyard.api import events_v1
from taskyard.api.tables import service_tables
from taskyard.cli import api_call
from tests.cli.helpers import Run, run

NO_SUCH = "A" * 22  # 22 characters of a slugid's alphabet, but not a slugid v4: no task has it


def test_an_id_of_the_right_form_that_no_task_has_does_not_exist(cli: Run) -> None:
    for args, said in (
        (("task", "status", NO_SUCH), f"taskyard: task {NO_SUCH} does not exist"),
        (("task", "log", NO_SUCH), f"taskyard: task {NO_SUCH} does not exist"),
        (("group", "status", NO_SUCH), f"taskyard: task group {NO_SUCH} does not exist"),
    ):
        err = cli(*args, status=1).stderr
        assert err.strip() == said, (args, err)
    # Not of the form: refused before any request, naming the rule.
    assert "'abc' is not a taskId (22 characters" in cli("task", "status", "abc", status=2).stderr
    # Creating in such a group is refused as before: it is not an id the queue takes.
    assert "is not a taskGroupId" in cli("task", "create", "-", "--task-group-id", NO_SUCH, status=2).stderr


def test_api_names_every_service_and_the_events_stream(cli: Run) -> None:
    assert set(api_call.SERVICES) == {*service_tables(), "events"}
    shown = cli("api", "--help").stdout
    assert "queue or auth" not in shown and "service_tables" not in shown
    assert "auth, events, hooks, index" in " ".join(shown.split())  # the help wraps the list
    methods = cli("api", "events").stdout.splitlines()
    assert [m.split()[0] for m in methods] == [r.name for r in events_v1.ROUTES]
    assert "taskyard events tail" in cli("api", "events", "stream", status=1).stderr
    assert '"alive": true' in cli("api", "events", "ping").stdout


def test_completion_refuses_an_unknown_shell_naming_only_the_shells() -> None:
    refused = run({}, "completion", "tcsh")
    assert refused.returncode == 2
    assert "'tcsh' is not a shell this supports: bash, zsh or fish" in refused.stderr
    assert "task-queues" not in refused.stderr and "worker-pools" not in refused.stderr
    assert run({}, "completion", "fish").returncode == 0
