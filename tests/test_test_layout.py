"""No test module imports another test module: shared helpers live in helpers modules.

Importing a `test_*` module from another one drags its tests, fixtures and module state along, and
couples files that pytest-xdist (`--dist loadfile`) runs in different processes. A helper used by
more than one file lives in its area's `helpers.py` (or `conftest.py`, for a fixture); see
docs/development.md, The test suite.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(path: Path) -> list[str]:
    """The `test_*` modules that `path` imports, each as `line: module`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [f"{node.lineno}: {name}" for name in names if is_test_module(name)]
    return found


def test_no_module_under_tests_imports_a_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := imported_test_modules(path))
    }
    listed = "\n".join(f"{path}, line {line}" for path, lines in offenders.items() for line in lines)
    assert not offenders, f"test modules imported (move the helpers to helpers.py or conftest.py):\n{listed}"


def test_the_check_sees_both_kinds_of_import(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "import tests.cli.test_admin\n"
        "from tests.api.test_auth_v1 import create_client\n"
        "from tests.storage import test_port\n"
        "from tests.cli.helpers import run\n"
        "from . import helpers\n"
    )
    assert imported_test_modules(source) == [
        "1: tests.cli.test_admin",
        "2: tests.api.test_auth_v1",
        "3: tests.storage.test_port",
    ]
