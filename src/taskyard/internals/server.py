"""uvicorn's internals that the server uses (see the package's docstring): each with why.

Only `cli/` imports this module, as only it may import uvicorn."""

from __future__ import annotations

# `ProxyHeadersMiddleware`: uvicorn's own X-Forwarded-Proto/-For rewriting, which the app applies
# itself (`cli/connections.py`'s `forwarded_headers()`). `_TrustedHosts` (private): the set of
# trusted proxies, parsed as `--forwarded-allow-ips` is (addresses, networks, `*`), so that the
# per-client connection cap exempts exactly the proxies the headers are trusted from.
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.middleware.proxy_headers import _TrustedHosts as TrustedHosts

# `HttpToolsProtocol` (a private module's): uvicorn's connection protocol on the C parser.
# `cli/connections.py`'s `HeadTimeoutProtocol` subclasses it, for the head and body timeouts,
# the per-client cap and the head written with the body; no public hook does any of these. It
# overrides the hooks in `PROTOCOL_HOOKS`, calling uvicorn's own in each, and reads and writes
# the attributes in `PROTOCOL_ATTRIBUTES` and, of a request's cycle, `CYCLE_ATTRIBUTES`
# (tests/test_internals.py checks they are there, and tests/cli/test_connections.py what they do).
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

__all__ = [
    "CYCLE_ATTRIBUTES",
    "PROTOCOL_ATTRIBUTES",
    "PROTOCOL_HOOKS",
    "HttpToolsProtocol",
    "ProxyHeadersMiddleware",
    "RequestResponseCycle",
    "TrustedHosts",
]

PROTOCOL_HOOKS = (
    "connection_made",  # wraps the transport (`_HeadWithBody`), arms the head timer, counts the client
    "connection_lost",  # forgets the client, cancels the timer
    "data_received",  # drops what a refused connection sends
    "on_message_begin",  # a new head on a kept-alive connection: its timer
    "on_headers_complete",  # the head is whole: the body's deadline; `BODY_PENDING` in the scope
    "on_body",  # more time for a large body's bytes
    "on_message_complete",  # the request is whole
)
PROTOCOL_ATTRIBUTES = (
    "loop",  # the timers' clock and `call_at`
    "client",  # the peer's (host, port): the per-client cap's key
    "transport",  # to write a 408 or 503 and close
    "scope",  # the current request's ASGI scope (`BODY_PENDING`)
    "cycle",  # the current request's `RequestResponseCycle` (None before the first)
)
CYCLE_ATTRIBUTES = (
    "response_started",  # whether the app began its answer (a 408 is sent only if not)
    "response_complete",  # whether the app finished it (a late head closes only an idle connection)
    "disconnected",  # set, with `message_event`, to tell the app the client is gone
    "message_event",
)
