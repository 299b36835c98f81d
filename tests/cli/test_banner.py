"""What `taskyard serve` and `taskyard up` print when they start: where everything is."""

from __future__ import annotations

from taskyard.cli.main import banner
from taskyard.config import ServerConfig


def test_the_banner_names_the_web_ui_at_the_root_url() -> None:
    shown = banner(ServerConfig(public_url="https://ci.example.com", root_access_token="token"))
    lines = shown.splitlines()
    assert "  web UI:        https://ci.example.com/" in lines
    assert "  queue API:     https://ci.example.com/api/queue/v1/" in lines
    assert "  index API:     https://ci.example.com/api/index/v1/" in lines
    assert "  secrets API:   https://ci.example.com/api/secrets/v1/" in lines
    assert "  hooks API:     https://ci.example.com/api/hooks/v1/" in lines
    assert "  notify API:    https://ci.example.com/api/notify/v1/ (email off: no --smtp-url)" in lines
    mailing = banner(ServerConfig(root_access_token="t", smtp_url="smtp://u:hunter2@mail.test:2525"))
    assert "email through mail.test:2525" in mailing and "hunter2" not in mailing
