"""`taskyard events tail`: what it refuses before it connects, and how it prints an event. The live
command against a real server and broker is tested in tests/e2e/test_events_tail.py."""

from __future__ import annotations

import pytest

from taskyard.cli import events, main
from taskyard.events.port import Envelope
from tests.events.rabbit import free_port


def tail(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main.main(["events", "tail", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_events_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TASKYARD_EVENTS", raising=False)


def test_without_a_broker_it_follows_the_server_and_needs_its_url_and_credentials(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("TASKCLUSTER_ROOT_URL", "TASKCLUSTER_CLIENT_ID", "TASKCLUSTER_ACCESS_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    for argv in ([], ["--events", "memory://"]):
        code, out, err = tail(capsys, *argv)
        assert (code, out) == (2, "")
        assert err == (
            "taskyard: configuration TASKCLUSTER_ROOT_URL='' is not valid: "
            "it is required: set it, pass --root-url, or use a context\n"
        )


def test_an_unreachable_server_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    root = f"http://127.0.0.1:{free_port()}"
    code, out, err = tail(capsys, "--root-url", root, "--client-id", "c", "--access-token", "hunter2")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith(
        f"taskyard: cannot reach {root} (GET /api/events/v1/stream)"
    )
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["primary..#"], "binding pattern 'primary..#' is not valid: word 2 is empty"),
        (["primary.*.b*"], "word 3 ('b*') mixes a wildcard with other characters"),
        ([""], "binding pattern '' is not valid: it is empty"),
        (["--exchange", "task-started"], "configuration --exchange='task-started' is not valid"),
        (["--exchange", "v1/queue:task-exception"], "v1/queue:task-failed"),
        (["--events", "amqp://u:hunter2@rabbit:port/"], "configuration --events="),
        (["--events", "rabbitmq://u:hunter2@rabbit/"], "must be memory:// or amqp://"),
    ],
)
def test_bad_usage_is_one_clear_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], words: str
) -> None:
    monkeypatch.setenv("TASKYARD_EVENTS", "amqp://guest:guest@127.0.0.1:5672/%2F")
    code, out, err = tail(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("taskyard: ") and words in err
    assert "hunter2" not in err


def test_an_unreachable_broker_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = tail(capsys, "--events", f"amqp://u:hunter2@127.0.0.1:{free_port()}/%2F")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith(
        "taskyard: cannot reach RabbitMQ at amqp://u:***@127.0.0.1:"
    )
    assert "hunter2" not in err


def test_exchanges_by_short_or_full_name_and_taskclusters_by_default() -> None:
    tc = "exchange/taskcluster-queue/v1/"
    default = events.exchanges(None)
    assert len(default) == 11 and all(e.startswith(tc) for e in default)
    assert events.exchanges(["task-pending", f"{tc}task-pending", "v1/queue:task-failed"]) == [
        f"{tc}task-pending",
        "v1/queue:task-failed",
    ]


def test_a_line_tells_time_exchange_routing_key_and_the_runs_state() -> None:
    status = {
        "taskId": "T",
        "state": "pending",
        "runs": [
            {"runId": 0, "state": "exception", "reasonResolved": "worker-shutdown"},
            {"runId": 1, "state": "pending"},
        ],
    }
    retried = Envelope(
        "exchange/taskcluster-queue/v1/task-exception",
        "primary.T.0.wg.w.p.t.s.g._",
        {"status": status, "runId": 0},
    )
    time, exchange, key, state = events.line(retried, as_json=False).split(" ")
    assert (exchange, key, state) == (
        "task-exception",
        "primary.T.0.wg.w.p.t.s.g._",
        "exception/worker-shutdown",
    )
    assert time.endswith("Z")
    seed = Envelope("v1/queue:task-pending", "T.1._._.p.t.s.g", {"version": "0.2.0", "status": status})
    assert events.line(seed, as_json=False).split(" ")[1:] == [
        "v1/queue:task-pending",
        "T.1._._.p.t.s.g",
        "pending",
    ]
    group = Envelope(
        "exchange/taskcluster-queue/v1/task-group-resolved", "primary.g.s._", {"taskGroupId": "g"}
    )
    assert events.line(group, as_json=False).endswith(" task-group-resolved primary.g.s._ -")
