"""How the commands that print data print it: `-o text|wide|json|yaml` (`--json` is `-o json`).

Text is for people: tables and fields, a task's state in colour on a terminal (never when
`NO_COLOR` is set, `TERM=dumb`, or the output is a pipe). `wide` adds the columns that do not
fit a narrow terminal. JSON and YAML print what the API answered, for scripts.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from typing import Any, TextIO

FORMATS = ("text", "wide", "json", "yaml")
COLOURS = {  # ANSI SGR codes per state
    "completed": "32",  # green
    "failed": "31",  # red
    "exception": "35",  # magenta
    "running": "36",  # cyan
    "pending": "33",  # yellow
    "unscheduled": "2",  # dim
}
_STATE = re.compile(r"\b(" + "|".join(COLOURS) + r")\b")


def add_options(parser: argparse.ArgumentParser) -> None:
    """`-o FORMAT` and its old spelling `--json`."""
    parser.add_argument(
        "-o",
        "--output",
        dest="format",
        choices=FORMATS,
        default="text",
        metavar="FORMAT",
        help="text (default), wide (more columns), json or yaml",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="the same as -o json"
    )


def options() -> argparse.ArgumentParser:
    """A parent parser holding the output options."""
    parent = argparse.ArgumentParser(add_help=False)
    add_options(parent)
    return parent


def render(data: Any, text: str, wide: str, fmt: str) -> str | None:
    """What to print for `fmt`; None for nothing."""
    if fmt == "json":
        return None if data is None else json.dumps(data, indent=2)
    if fmt == "yaml":
        import yaml  # imported when used: `serve` and most commands print no YAML

        return None if data is None else yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip()
    shown = wide if fmt == "wide" and wide else text
    return shown or None


def show(data: Any, text: str, wide: str, fmt: str, out: TextIO, environ: Mapping[str, str]) -> None:
    said = render(data, text, wide, fmt)
    if said is None:
        return
    if fmt in ("text", "wide") and coloured(out, environ):
        said = colour_states(said)
    print(said, file=out)


def coloured(out: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour for a terminal only, and never with NO_COLOR (https://no-color.org) or TERM=dumb."""
    if "NO_COLOR" in environ or environ.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def colour_states(text: str) -> str:
    return _STATE.sub(lambda m: f"\x1b[{COLOURS[m.group(1)]}m{m.group(1)}\x1b[0m", text)
