"""What a task's taskcluster-proxy adds to a call (`features.taskclusterProxy`; aim: ≤ 2 ms p50).

Starts a real `taskyard serve` (SQLite) and, in this process, the worker's `TaskProxy` with
temporary credentials restricted to a few scopes, as a run's are. Then it makes the same call,
`GET /api/auth/v1/scopes/current`, one at a time over a kept-alive connection, in rounds of two
kinds, alternating:

direct    signed here with the same credentials and the same `ext` (certificate and
          authorizedScopes) the proxy sends, so the server does the same work;
proxied   unsigned, to `TASKCLUSTER_PROXY_URL`: the proxy signs and forwards it.

It prints each kind's latency p50 and p90 (the median over the rounds) and the difference of the
p50s: what the proxy adds. Figures are printed, never asserted.

Run: .venv/bin/python bench/proxy.py [--calls 1000] [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT_DIR = Path(__file__).resolve().parent.parent
if str(ROOT_DIR) not in sys.path:  # run as a script: `bench.*` is imported from the checkout
    sys.path.insert(0, str(ROOT_DIR))

from bench.lifecycle import Server, kill_leftovers, taskyard_command  # noqa: E402

from taskyard.auth import hawk, hawk_client  # noqa: E402
from taskyard.worker.client import Credentials  # noqa: E402
from taskyard.worker.proxy import TaskProxy  # noqa: E402

ROOT_CLIENT_ID = "static/taskyard/root"
SCOPES = ["auth:current-scopes", "queue:get-task:*"]
PATH = "/api/auth/v1/scopes/current"
KINDS = ("direct", "proxied")


async def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="taskyard-proxy-") as data:
        server = Server(Path(data), None, secrets.token_urlsafe(32), taskyard_command())
        proxy: TaskProxy | None = None
        try:
            await server.start()
            start_ms = int(time.time() * 1000) - 60_000
            temp = hawk.temporary_credentials(
                ROOT_CLIENT_ID, server.token, SCOPES, start_ms, start_ms + 3_600_000
            )
            creds = Credentials(temp["clientId"], temp["accessToken"], temp["certificate"])
            proxy = TaskProxy(server.root_url, lambda: creds, SCOPES)
            proxy_url = await proxy.start()
            ext = hawk_client.restricted_ext(creds.certificate, SCOPES)
            async with aiohttp.ClientSession() as http:
                direct = _direct(http, server.root_url + PATH, creds, ext)
                proxied = _proxied(http, proxy_url + PATH)
                await _round(direct, 50)  # warm: connections, caches
                await _round(proxied, 50)
                rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
                for _ in range(args.rounds):
                    rounds["direct"].append(await _round(direct, args.calls))
                    rounds["proxied"].append(await _round(proxied, args.calls))
        finally:
            if proxy is not None:
                await proxy.stop()
            server.stop()
            kill_leftovers()
    return {
        kind: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for kind, results in rounds.items()
    }


def _direct(http: aiohttp.ClientSession, url: str, creds: Credentials, ext: str) -> Any:
    async def call() -> None:
        auth = hawk_client.sign_header("GET", url, None, "", creds.client_id, creds.access_token, ext=ext)
        async with http.get(url, headers={"Authorization": auth}) as answer:
            await answer.read()
            assert answer.status == 200, answer.status

    return call


def _proxied(http: aiohttp.ClientSession, url: str) -> Any:
    async def call() -> None:
        async with http.get(url) as answer:
            await answer.read()
            assert answer.status == 200, answer.status

    return call


async def _round(call: Any, calls: int) -> dict[str, float]:
    """p50 and p90 latency in ms of `calls` calls made one after the other."""
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        await call()
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return {"p50_ms": times[len(times) // 2], "p90_ms": times[int(len(times) * 0.9)]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000, help="calls per kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    print(f"{'currentScopes':28}{'p50 ms':>10}{'p90 ms':>10}")
    for kind in KINDS:
        print(f"{kind:28}{figures[kind]['p50_ms']:>10.2f}{figures[kind]['p90_ms']:>10.2f}")
    added = figures["proxied"]["p50_ms"] - figures["direct"]["p50_ms"]
    print(f"the proxy adds, p50: {added:.2f} ms (median of {args.rounds} rounds)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
