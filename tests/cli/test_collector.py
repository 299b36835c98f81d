"""`serve` settles the garbage collector once the deployment is open (`serve.settle_collector`):
what start-up made is frozen out of every collection, and full collections are ten times rarer."""

from __future__ import annotations

import subprocess
import sys


def test_start_ups_objects_are_frozen_and_full_collections_rarer() -> None:
    code = (
        "import gc\n"
        "from taskyard.cli import serve\n"
        "young, middle, _ = gc.get_threshold()\n"
        "serve.settle_collector()\n"
        "print(gc.get_freeze_count() > 10_000, gc.get_threshold() == (young, middle, 100))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True"]
