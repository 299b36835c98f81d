"""`serve` imports neither the web UI's pages nor the other commands' modules before it answers:
they are imported when first used (a page's request, another command)."""

from __future__ import annotations

import subprocess
import sys

LATER = ("jinja2", "yaml", "taskyard.ui.render", "taskyard.cli.admin", "taskyard.cli.tasks")


def test_serve_imports_no_page_and_no_other_command() -> None:
    code = (
        "import sys\n"
        "from taskyard.cli import main, serve\n"
        "main.parser('serve').parse_args(['serve'])\n"
        f"print(' '.join(m for m in {LATER!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
