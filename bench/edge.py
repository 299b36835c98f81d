"""What the HTTP edge costs the server per request, apart from any handler's work.

Starts a real `taskyard serve` (SQLite, as `lifecycle.py` does) and sends, over N kept-alive
connections from this process, rounds of two kinds of request, one kind at a time:

ping      `GET /api/queue/v1/ping`, unsigned: the server (uvicorn, the app's front, the route,
          the answer) around a handler that does nothing.
signed    `GET /api/auth/v1/scopes/current`, signed by the root client as TaskCluster's Python
          client signs (mohawk, sha256, an `ext`): the same plus Hawk, the role expansion and
          the scope check, around a handler that reads nothing from the database.

For each kind it prints the server's CPU per request (from /proc, its user and kernel time
apart) and the requests answered per second, the median of the rounds, kinds alternating. The
difference between the two rows is what authentication costs a call; a lifecycle makes three
signed calls. Figures are printed, never asserted.

Run: .venv/bin/python bench/edge.py [--requests 8000] [--connections 16] [--rounds 3]
[--taskyard "env PYTHONPATH=<other checkout>/src .venv/bin/python -m taskyard.cli.main"] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parent.parent
if str(ROOT_DIR) not in sys.path:  # run as a script: `bench.*` is imported from the checkout
    sys.path.insert(0, str(ROOT_DIR))

from bench.lifecycle import (  # noqa: E402
    Api,
    Server,
    edge_round,
    kill_leftovers,
    taskyard_command,
)

KINDS = ("ping", "signed")


async def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    command = shlex.split(args.taskyard) if args.taskyard else taskyard_command()
    with tempfile.TemporaryDirectory(prefix="taskyard-edge-") as data:
        server = Server(Path(data), None, secrets.token_urlsafe(32), command)
        try:
            await server.start()
            api = Api(server.root_url, "raw")
            api.base = server.root_url + "/api/auth/v1"
            await edge_round(api, server, "signed", 200, args.connections)  # warm: caches, first imports
            rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
            for _ in range(args.rounds):
                for kind in KINDS:
                    rounds[kind].append(await edge_round(api, server, kind, args.requests, args.connections))
        finally:
            server.stop()
            kill_leftovers()
    return {
        kind: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for kind, results in rounds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=8000, help="requests per kind per round")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--taskyard", help="command that runs taskyard (default: this venv's)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    print(f"{'':36}{'server CPU µs/request':>22}{'of it kernel':>14}{'requests/s':>12}")
    labels = {"ping": "ping (unsigned, no handler work)", "signed": "currentScopes (Hawk, scopes)"}
    for kind, label in labels.items():
        f = figures[kind]
        print(f"{label:36}{f['cpu_us']:>22.0f}{f['kernel_share']:>13.0%}{f['per_s']:>12.0f}")
    auth = figures["signed"]["cpu_us"] - figures["ping"]["cpu_us"]
    print(f"authentication and the scope check, µs/request: {auth:.0f} (median of {args.rounds} rounds)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
