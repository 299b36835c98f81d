"""The options' declaration (`cli/settings.py`) is the one place each option is said: the parsers,
the config objects and the docs' table all agree with it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from taskyard import config
from taskyard.cli import connections, main, settings
from taskyard.cli.settings import OPTIONS, Computed, Option

DOCS = Path(__file__).parents[2] / "docs" / "operations.md"
COMMANDS = ("serve", "up", "worker", "migrate", "backup", "restore", "events tail")
CLIENT_COMMANDS = ("events tail", "task list", "client create", "api")  # some of `settings.CLIENTS`


def test_the_docs_table_is_the_declared_one() -> None:
    shown = settings.table_in(DOCS.read_text())
    assert shown == settings.markdown(), (
        "docs/operations.md's table of options is not the one src/taskyard/cli/settings.py declares: "
        "run `make docs` (python -m taskyard.cli.settings --write docs/operations.md)"
    )


def test_the_table_is_written_between_its_markers_only(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Before\n\n{settings.BEGIN}\n| stale |\n{settings.END}\n\nAfter.\n")
    assert settings.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith(f"# Before\n\n{settings.BEGIN}\n| flag |") and text.endswith(
        f"{settings.END}\n\nAfter.\n"
    )
    assert settings.table_in(text) == settings.markdown() and "stale" not in text


def test_every_option_has_one_row_and_every_row_its_variable() -> None:
    rows = settings.markdown().splitlines()[2:]
    assert len(rows) == len(OPTIONS)
    for option, row in zip(OPTIONS, rows, strict=True):
        assert f"| `{option.variable}` |" in row
        assert (
            option.variable.startswith(("TASKYARD_", "TASKCLUSTER_"))
            or option.variable == "FORWARDED_ALLOW_IPS"
        )


def test_no_command_takes_one_flag_or_variable_twice() -> None:
    for command in (*COMMANDS, settings.CLIENTS):
        declared = list(settings.of(command))
        flags = [option.flag for option in declared if option.flag]
        variables = [option.variable for option in declared]
        assert len(set(flags)) == len(flags) and len(set(variables)) == len(variables), command


def test_a_flags_variable_is_taskyard_and_its_name() -> None:
    for option in OPTIONS:
        if option.flag and option.variable.startswith("TASKYARD_"):
            assert option.variable == "TASKYARD_" + option.flag[2:].replace("-", "_").upper()


def sub_parser(command: str) -> argparse.ArgumentParser:
    parser = main.parser()
    for word in command.split():
        found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = found.choices[word]
    return parser


@pytest.mark.parametrize("command", sorted({*COMMANDS, *CLIENT_COMMANDS}))
def test_each_command_takes_the_flags_declared_for_it_and_no_other(command: str) -> None:
    parser = sub_parser(command)
    helps = {flag: action.help or "" for action in parser._actions for flag in action.option_strings}
    taken = [*settings.of(command), *(settings.of(settings.CLIENTS) if command in CLIENT_COMMANDS else ())]
    declared = {option.flag: option for option in taken if option.flag}
    for flag, option in declared.items():
        assert flag in helps, f"{command} lacks {flag}"
        assert f"[env {option.variable}" in helps[flag] and helps[flag].startswith(option.help)
    variables = {
        flag for flag, text in helps.items() if "[env TASKYARD_" in text or "[env TASKCLUSTER_" in text
    }
    assert variables == set(declared), f"{command} has options the declaration lacks"


def test_each_config_field_is_an_option_or_named_as_fixed() -> None:
    for section in ("ServerConfig", "QueueConfig", "WorkerConfig"):
        kind = getattr(config, section)
        names = {each.name for each in dataclasses.fields(kind)} - set(settings.sections(kind))
        declared = {o.field.split(".")[1] for o in OPTIONS if o.field.startswith(f"{section}.")}
        assert names == declared | settings.NOT_OPTIONS[section], section
        assert not declared & settings.NOT_OPTIONS[section]


def command_defaults(command: str) -> dict[str, object]:
    return {o.dest: o.default_for(command) for o in settings.of(command)}


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.field and o.read is None], ids=lambda o: o.flag)
def test_a_declared_default_checks_to_its_config_fields_default(option: Option) -> None:
    """A default given in both places (a parsed form, or a default of its own) says the same."""
    if isinstance(option.default, Computed):
        return  # the host name, the cores: the field's default is for a config built in code
    command = option.commands[0]
    value = option.value(option.default_for(command), command_defaults(command))
    assert value == settings.field_default(option.field)


def test_the_defaults_of_variables_read_elsewhere_are_theirs() -> None:
    declared = {o.variable: o.default for o in OPTIONS}
    assert declared["FORWARDED_ALLOW_IPS"] == connections.TRUSTED_BY_DEFAULT
    assert declared["TASKYARD_LOG_LEVEL"] == main.log_level({})


def test_computed_defaults_are_worked_out_per_command() -> None:
    capacity = next(o for o in OPTIONS if o.flag == "--capacity")
    assert capacity.default_for("worker") == 1 and capacity.default_for("up") == settings.cores()
    assert (
        next(o for o in OPTIONS if o.flag == "--worker-id").default_for("worker")
        == settings.default_worker_id()
    )
