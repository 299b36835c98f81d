"""Secrets the CLI reads from the environment or keeps in the data directory."""

from __future__ import annotations

import stat
from pathlib import Path

from taskyard.cli import options
from taskyard.config import ServerConfig


def test_the_secret_key_is_made_once_and_kept_private(tmp_path: Path) -> None:
    key = options.secret_key(str(tmp_path / "data"), {})
    stored = tmp_path / "data" / "secret-key"
    assert stored.read_text().strip() == key and len(key) >= 40
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert options.secret_key(str(tmp_path / "data"), {}) == key
    assert options.secret_key(str(tmp_path / "data"), {"TASKYARD_SECRET_KEY": "from-env"}) == "from-env"
    assert key != options.root_access_token(str(tmp_path / "data"), {})


def test_secrets_never_show_in_the_config_repr() -> None:
    shown = repr(ServerConfig(root_access_token="root-token-value", secret_key="secret-key-value"))
    assert "root-token-value" not in shown and "secret-key-value" not in shown
