"""The scale-out example (deploy/docker-compose.yml) stays true: every taskyard command it runs
parses with today's command line, and the server's options make a valid scale-out config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from taskyard.cli import options
from taskyard.cli.main import parser

COMPOSE = Path(__file__).parents[2] / "deploy" / "docker-compose.yml"


def commands() -> dict[str, list[str]]:
    """The command of each service built from the project's image, `${VAR:-default}` expanded."""
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    built = {name: s["command"] for name, s in services.items() if "build" in s}
    expand = re.compile(r"\$\{[A-Z0-9_]+:-([^}]*)\}")
    return {name: [expand.sub(r"\1", word) for word in command] for name, command in built.items()}


def test_the_example_runs_several_api_processes_and_a_worker() -> None:
    assert {c[0] for c in commands().values()} == {"serve", "worker"}


def test_the_servers_options_are_a_valid_scale_out_config(tmp_path: Path) -> None:
    for command in commands().values():
        args = parser().parse_args(command)
        if args.command != "serve":
            continue
        values = options.resolve(args, {})
        values["data_dir"] = str(tmp_path)
        config = options.server_config(values, {})
        assert config.processes > 1
        assert config.db_url.startswith("postgresql://")
        assert config.events.startswith("amqp://")
        assert config.artifacts.startswith("s3://")
