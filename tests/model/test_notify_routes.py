"""Task routes that ask for notifications, as TaskCluster's notify reads them, and the SMTP URL."""

from __future__ import annotations

import pytest

from taskyard.model.errors import ConfigError
from taskyard.model.notify_routes import NotifyRoute, fires, ignored, parse, refusal, task_email
from taskyard.notify.mail import parse_url, redact


def test_a_route_s_target_is_everything_between_its_kind_and_its_event() -> None:
    assert parse("notify.email.a.b@c.d.on-failed") == NotifyRoute("email", "a.b@c.d", "failed")
    assert parse("notify.pulse.my.key.on-any") == NotifyRoute("pulse", "my.key", "any")
    assert parse("notify.email.on-failed") is None  # no target
    assert parse("notify.email.a@b.c.failed") is None
    assert parse("index.email.a@b.c.on-failed") is None


@pytest.mark.parametrize(
    ("event", "state", "expected"),
    [
        ("completed", "completed", True),
        ("completed", "failed", False),
        ("any", "exception", True),
        ("resolved", "failed", True),
        ("resolved", "running", False),
        ("transition", "pending", True),
        ("defined", "unscheduled", True),
        ("pending", "pending", True),
    ],
)
def test_which_events_fire(event: str, state: str, expected: bool) -> None:
    assert fires(event, state) is expected


def test_a_canceled_or_expired_exception_is_ignored() -> None:
    assert ignored({"state": "exception", "runs": [{"reasonResolved": "canceled"}]})
    assert ignored({"state": "exception", "runs": [{"reasonResolved": "deadline-exceeded"}]})
    assert not ignored({"state": "exception", "runs": [{"reasonResolved": "malformed-payload"}]})
    assert not ignored({"state": "failed", "runs": [{"reasonResolved": "failed"}]})


def test_routes_without_a_transport_are_refused_with_a_reason() -> None:
    assert "no slack-channel transport" in (refusal(NotifyRoute("slack-channel", "C1", "failed")) or "")
    assert "not an email address" in (refusal(NotifyRoute("email", "nobody", "failed")) or "")
    assert refusal(NotifyRoute("email", "a@b.c", "failed")) is None


def test_the_default_email_names_the_task_and_links_to_its_page() -> None:
    status = {"state": "failed", "taskGroupId": "G", "runs": [{}]}
    task = {"metadata": {"name": "build", "owner": "o@x.y"}}
    mail = task_email("T1", status, task, "https://ty.test")
    assert mail.subject == "Task failed: build - T1"
    assert mail.link == ("Inspect Task", "https://ty.test/tasks/T1")
    assert "(in 1 run)" in mail.content


def test_the_smtp_url_is_parsed_and_its_password_never_shown() -> None:
    smtp = parse_url("smtp://u%40x:p%3Aw@mail.test:2525?from=ci@x.test")
    assert (smtp.host, smtp.port, smtp.user, smtp.password, smtp.sender) == (
        "mail.test",
        2525,
        "u@x",
        "p:w",
        "ci@x.test",
    )
    assert "p%3Aw" not in repr(smtp) and "p:w" not in repr(smtp)
    assert parse_url("smtps://mail.test").port == 465
    with pytest.raises(ConfigError) as info:
        parse_url("http://u:hunter2@mail.test")
    assert "hunter2" not in str(info.value) and "smtp-url" in str(info.value)
    assert "hunter2" not in redact("smtp://u:hunter2@h:1")
