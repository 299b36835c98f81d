"""`taskyard notify test --email` against a real server: the module's has no SMTP server, so the
command fails saying so rather than claiming it sent anything. (Sending through a real SMTP
server is tests/e2e/test_notify.py's.)"""

from __future__ import annotations

from tests.cli.helpers import Run


def test_without_smtp_the_test_email_fails_and_says_why(cli: Run) -> None:
    failed = cli("notify", "test", "--email", "me@example.test", status=1)
    assert "--smtp-url" in failed.stderr
    assert "sent" not in failed.stdout
    bad = cli("notify", "test", "--email", "not-an-address", status=1)
    assert "address" in bad.stderr
