"""What the fuzzer aims at: every route the app serves, and how to build hostile requests for it.

`targets(app)` reads the routes from the built app itself (walking a `Mount`'s routes), so a route
added later is fuzzed without anyone listing it here, and so is a service added to
`service_tables()`; a route of a kind this module cannot build requests for is `uncovered()`, and
test_fuzz fails naming it. The scheduler's graph bodies are in `fuzz_graphs`, the Azure-queue
endpoint's requests in `fuzz_azure`.
"""

from __future__ import annotations

import base64
import gzip
import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount
from starlette.routing import Route as StarletteRoute

from taskyard.api import app as api_app
from taskyard.api import blobs, livelog_v1
from taskyard.api.routing import Route
from taskyard.auth import hawk
from taskyard.model import dates
from taskyard.ui.app import Pages
from tests.api import fuzz_azure, fuzz_graphs
from tests.api.conftest import GOOD_PARAMS, valid_body
from tests.api.fuzz_values import Values
from tests.api.fuzzing import HOST, Req

# The API tables build_app() serves, by prefix: every service's, as the app takes them.
TABLES = {f"/api/{name}/v1": table for name, table in api_app.service_tables().items()}
# Routes that read a body their table declares no input schema for: the service checks it.
CHECKED_BODIES = {"createTask", *fuzz_graphs.NAMES}
SPECIAL = {blobs.PATH: "blob", livelog_v1.PATH: "livelog"}
# Pages without parameters: `/api`, each service's index, OpenAPI document and reference, /metrics.
INDEXES = {
    "/api",
    "/api/",
    "/metrics",
    *(p + s for p in TABLES for s in ("", "/", "/openapi.json", "/reference")),
}
FUZZ_POOL = "fuzz/static"  # a static worker pool test_fuzz creates, with a worker of GOOD_PARAMS' ids
FUZZ_SECRET = "f" * 44
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"]
QUERY_NAMES = ["limit", "continuationToken", "quarantined", "prefix", "follow", "e", "s", "u", "ce", "bewit"]
ARTIFACT_HEADERS = ["range", "if-none-match", "if-modified-since", "if-range", "accept-encoding"]


@dataclass(frozen=True)
class Target:
    """One route of the app: what kind it is, its method and path template, its table entry."""

    kind: str  # "table", "blob", "livelog", "azure", "index" or "ui" (the web UI's pages and forms)
    method: str
    path: str  # the app's template, prefix included: /api/queue/v1/task/{taskId}
    route: Route | None = None

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}" if self.route is None else f"{self.route.name} ({self.method})"


@dataclass
class Creds:
    client_id: str
    key: str
    certificate: dict[str, Any] | None = None


@dataclass
class State:
    """What the fuzzer's requests point at: real records, valid credentials and signed URLs."""

    now: int
    root: Creds
    others: list[Creds]
    good: dict[str, list[str]]
    blob_keys: list[str]
    sign_blob_get: Any  # (key, expires) -> URL
    sign_livelog: Any  # (task_id, run_id, expires) -> URL
    put_urls: list[str]  # upload URLs of s3 artifacts (text/plain), each good for one upload
    bodies: dict[str, Any] = field(default_factory=dict)
    graphs: dict[str, fuzz_graphs.Graph] = field(default_factory=dict)  # by taskGraphId
    azure: fuzz_azure.Azure = field(default_factory=lambda: fuzz_azure.Azure([], [], []))


_EMPTY_TAIL = re.compile(r"/\{\w+:path\}$")  # the index's lists also answer without their namespace


def _table_route(prefix_path: str, method: str) -> Route | None:
    for prefix, table in TABLES.items():
        for r in table:
            paths = (prefix + r.path, prefix + r.path.rstrip("/"), prefix + _EMPTY_TAIL.sub("", r.path))
            if method == r.method and prefix_path in paths:
                return r
    return None


def targets(app: Starlette) -> list[Target]:
    """Every (route, method) the app answers, as a Target; unknown kinds have kind "unknown"."""
    return [t for r in app.routes for t in _route_targets(r, "")]


def _route_targets(r: BaseRoute, prefix: str) -> list[Target]:
    if isinstance(r, Mount):
        return [t for sub in r.routes for t in _route_targets(sub, prefix + r.path)]
    if isinstance(r, Pages):  # the UI's routes, built on first use
        return [t for sub in r.routes for t in _route_targets(sub, prefix)]
    assert isinstance(r, StarletteRoute), r
    path, found = prefix + r.path, []
    for method in sorted((r.methods or set()) - {"HEAD"}) or ["GET"]:
        table = _table_route(path, method)
        if table is not None:
            found.append(Target("table", method, path, table))
        elif path in SPECIAL:
            found.append(Target(SPECIAL[path], method, path))
        elif path in INDEXES:
            found.append(Target("index", method, path))
        elif path == fuzz_azure.PREFIX or path.startswith(fuzz_azure.PREFIX + "/"):
            found.append(Target("azure", method, path))
        elif not path.startswith("/api/"):
            found.append(Target("ui", method, path))
        else:
            found.append(Target("unknown", method, path))
    return found


def valid_bodies(now: int) -> dict[str, Any]:
    """A body each route with an input schema accepts (and those of CHECKED_BODIES, checked by their
    services): conftest's `valid_body()` for the queue's routes, the auth service's here, and a
    final-form graph (fuzz_graphs picks each request's body, of either form)."""
    queue = {r.name: valid_body(r.name, now) for r in TABLES["/api/queue/v1"]}
    graph = fuzz_graphs.final_form(now, GOOD_PARAMS["taskId"], GOOD_PARAMS["taskGroupId"][::-1])
    tomorrow = dates.to_iso(now + dates.DAY)
    client = {"expires": tomorrow, "description": "fuzzed", "scopes": ["queue:status:*"]}
    role = {"scopes": ["queue:status:*"], "description": "fuzzed"}
    hook = {
        "metadata": {"name": "fuzz", "description": "fuzzed", "owner": "fuzz@example.test"},
        "schedule": ["0 0 * * * *"],
        "task": {"$let": {"x": 1}, "in": {"taskQueueId": "p/w", "payload": {}}},
        "triggerSchema": {"type": "object", "additionalProperties": True},
        "bindings": [{"exchange": "exchange/fuzz/v1/x", "routingKeyPattern": "#"}],
    }
    pool = {
        "providerId": "static",
        "description": "fuzzed",
        "config": {"workerConfig": {"a": [1]}},
        "owner": "fuzz@example.test",
        "emailOnError": False,
    }
    task = queue["createTask"] | {
        "schedulerId": "fuzz",
        "projectId": "fuzz/project",
        "taskGroupId": GOOD_PARAMS["taskGroupId"],
        "dependencies": [],
        "requires": "all-resolved",
        "routes": ["index.fuzz"],
        "priority": "low",
        "retries": 1,
        "expires": tomorrow,
        "scopes": ["queue:get-task:*"],
        "tags": {"k": "v"},
        "extra": {"x": [1]},
    }
    return {name: body for name, body in queue.items() if body is not None} | {
        "createTask": task,  # every field, so that mutations meet each
        "createClient": client,
        "updateClient": client,
        "createRole": role,
        "updateRole": role,
        "expandScopes": {"scopes": ["assume:fuzz-role"]},
        "authenticateHawk": {"method": "get", "resource": "/", "host": HOST, "port": 80},
        "testAuthenticate": {"clientScopes": ["a:*"], "requiredScopes": ["a:b"]},
        "createTaskGraph": graph,
        "insertTask": {"taskId": GOOD_PARAMS["taskId"], "rank": 1, "data": {"a": [1]}, "expires": tomorrow},
        "findTasksAtIndex": {"indexes": ["fuzz.latest", "fuzz.missing", "nodot"]},
        "extendTaskGraph": fuzz_graphs.extend_final(now, GOOD_PARAMS["taskId"], GOOD_PARAMS["taskId"][::-1]),
        "set": {"secret": {"token": "fuzzed", "n": [1, {"x": None}]}, "expires": tomorrow},
        "email": {"address": "fuzz@example.test", "subject": "s", "content": "c"},
        "pulse": {"routingKey": "fuzz.key", "message": {"a": 1}},
        "matrix": {"roomId": "!r:x.test", "body": "b"},
        "slack": {"channelId": "C1", "text": "t"},
        "addDenylistAddress": {"notificationType": "email", "notificationAddress": "fuzz@example.test"},
        "deleteDenylistAddress": {"notificationType": "email", "notificationAddress": "fuzz@example.test"},
        "createHook": hook,
        "updateHook": hook,
        "triggerHook": {"a": [1]},
        "triggerHookWithToken": {"a": [1]},
        "createWorkerPool": pool,
        "updateWorkerPool": pool,
        "createWorker": {"expires": tomorrow, "capacity": 2, "providerInfo": {"staticSecret": FUZZ_SECRET}},
        "updateWorker": {"expires": tomorrow, "providerInfo": {"staticSecret": FUZZ_SECRET}},
        "reportWorkerError": {
            "workerGroup": GOOD_PARAMS["workerGroup"],
            "workerId": GOOD_PARAMS["workerId"],
            "kind": "fuzz",
            "title": "t",
            "description": "d",
            "extra": {"a": 1},
        },
        "registerWorker": {
            "workerPoolId": FUZZ_POOL,
            "providerId": "static",
            "workerGroup": GOOD_PARAMS["workerGroup"],
            "workerId": GOOD_PARAMS["workerId"],
            "workerIdentityProof": {"staticSecret": FUZZ_SECRET},
        },
        "reregisterWorker": {
            "workerPoolId": FUZZ_POOL,
            "workerGroup": GOOD_PARAMS["workerGroup"],
            "workerId": GOOD_PARAMS["workerId"],
            "secret": FUZZ_SECRET,
        },
    }


def uncovered(found: list[Target], state: State) -> list[str]:
    """The targets the fuzzer cannot build good requests for: say what each lacks."""
    missing = [
        f"{t.method} {t.path}: a route of no kind the fuzzer knows" for t in found if t.kind == "unknown"
    ]
    for t in found:
        params = [p.split(":")[0] for p in _params(t.path)]
        missing += [f"{t.name}: no good value for {{{p}}}" for p in params if p not in state.good]
        r = t.route
        if r is not None and (r.input is not None or r.name in CHECKED_BODIES) and r.name not in state.bodies:
            missing.append(f"{t.name}: no valid body")
    return missing


def _params(path: str) -> list[str]:
    return [part.split("}")[0] for part in path.split("{")[1:]]


# What a request may have broken; each request breaks a few of these in an otherwise valid call,
# so that it gets past the checks it keeps and reaches the code behind them.
FLAWS = [
    "method",
    "path",
    "reshape",
    "query",
    "body",
    "body",
    "content-type",
    "auth",
    "auth",
    "length",
    "encoding",
    "headers",
    "host",
    "chunks",
    "range",
    "signature",
]


class Builder:
    """Hostile requests for targets; every choice comes from `values.rng` (a seeded run)."""

    def __init__(self, values: Values, state: State) -> None:
        self.v = values
        self.rng = values.rng
        self.state = state
        self.flaws: set[str] = set()
        self.params: dict[str, str] = {}  # the good values the request's path was built from

    def build(self, t: Target) -> Req:
        """A valid call of `t` with a few flaws (sometimes none), unsigned one time in five."""
        self.flaws = set(self.rng.sample(FLAWS, self.rng.choice([0, 1, 1, 1, 2, 2, 3, 5])))
        if t.route is not None and t.route.name in self.state.bodies and self.v.chance(0.25):
            self.flaws.add("body")  # where there is a schema, break the body more often
        method = self.rng.choice(METHODS) if "method" in self.flaws else t.method
        if t.kind == "blob":
            return self._blob(method)
        if t.kind == "livelog":
            return self._livelog(method)
        if t.kind == "azure":
            return fuzz_azure.build(self, method, t.path)
        path = self._path(t)
        query = self._query() if "query" in self.flaws else ""
        body, content_type = self._body(t, method)
        return self._finish(t, method, path, query, body, content_type)

    # Paths ------------------------------------------------------------------------------------

    def _path(self, t: Target) -> str:
        params = _params(t.path)
        hostile = self.rng.choice(params) if params and "path" in self.flaws else None
        path, self.params = t.path, {}
        for p in params:
            value = self.params[p] = self._good(p.split(":")[0], t)
            encoded = self.v.url_part(self.v.text()) if p == hostile else quote(value, safe="")
            path = path.replace("{" + p + "}", encoded)
        return self._reshape(path) if "reshape" in self.flaws else path

    def _good(self, name: str, t: Target) -> str:
        route = t.route.name if t.route is not None else ""
        if (name, route) == ("taskId", "createTask"):
            return self.fresh_slug()
        if (name, route) == ("taskGraphId", "createTaskGraph") and self.v.chance(0.85):
            return self.fresh_slug()  # else one of arrange()'s graphs: create-or-compare
        graph = self.state.graphs.get(self.params.get("taskGraphId", ""))
        if (name, route) == ("taskId", "inspectTask") and graph is not None and self.v.chance(0.8):
            return self.rng.choice(graph.task_ids)  # a task of the graph the path names
        return self.rng.choice(self.state.good[name])

    def _reshape(self, path: str) -> str:
        return self.rng.choice(
            [
                path + "/",
                path.rstrip("/"),
                path.replace("/", "//", 1),
                path + "/..",
                path + "/%2E%2E/x",
                path.upper(),
                path + "/" + self.v.url_part(self.v.text()),
                path + ";x=1",
            ]
        )

    def fresh_slug(self) -> str:
        raw = bytearray(uuid.UUID(bytes=self.rng.randbytes(16), version=4).bytes)
        raw[0] &= 0x7F  # as slugid.nice(), from the run's seed
        return base64.urlsafe_b64encode(bytes(raw)).decode()[:22]

    def _query(self, base: list[tuple[str, str]] | None = None) -> str:
        pairs = list(base or [])
        for _ in range(self.rng.randint(1, 3)):
            name = self.rng.choice(QUERY_NAMES) if self.v.chance(0.9) else self.v.text()
            pairs.append((name, self._query_value(name)))
        self.rng.shuffle(pairs)
        if self.v.chance(0.1):
            return "&".join(self.v.url_part(n) + "=" + self.v.url_part(v) for n, v in pairs)
        return qs(pairs)

    def _query_value(self, name: str) -> str:
        if name == "continuationToken" and self.v.chance(0.6):
            raw = self.v.raw_bytes(24) if self.v.chance(0.5) else self.v.encode(self.v.value())
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return self.v.number_text() if self.v.chance(0.5) else self.v.text()

    # Bodies -----------------------------------------------------------------------------------

    def _body(self, t: Target, method: str) -> tuple[bytes, str | None]:
        valid = self.state.bodies.get(t.route.name) if t.route is not None else None
        v = self.v
        if t.route is not None and t.route.name in fuzz_graphs.NAMES:
            graph = self.state.graphs.get(self.params.get("taskGraphId", ""))
            valid = fuzz_graphs.body(self, v.chance, t.route.name, graph, self.state.now)
        if t.route is not None and t.route.name == "createTask" and v.chance(0.8):
            valid = valid | {"taskGroupId": self.fresh_slug()}  # a group no seal has closed
        if isinstance(valid, dict) and "scopes" in valid and v.chance(0.3):
            valid = valid | {"scopes": v.scopes()}  # valid, for the schema
        if "body" not in self.flaws:
            return (b"", None) if valid is None else (v.encode(valid), "application/json")
        valid_raw = v.encode(valid) if valid is not None else b"{}"
        body = v.pick(
            [
                (6, lambda: v.encode(v.mutate(valid if valid is not None else {}))),
                (1, lambda: v.encode(v.value())),
                (3, lambda: v.broken_json(valid_raw)),
                (1, v.sized),
            ]
        )
        return body, "application/json"

    def _content_type(self) -> str | None:
        rng = self.rng
        return self.v.pick(
            [
                (
                    3,
                    lambda: rng.choice(
                        ["application/json; charset=utf-8", "APPLICATION/JSON", "application/json;"]
                    ),
                ),
                (
                    2,
                    lambda: rng.choice(
                        ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
                    ),
                ),
                (1, lambda: None),
                (1, self.v.text),
            ]
        )

    # Headers ----------------------------------------------------------------------------------

    def _finish(self, t: Target, method: str, path: str, query: str, body: bytes, ctype: str | None) -> Req:
        headers: list[tuple[str, str | bytes]] = [("host", HOST)]
        if "content-type" in self.flaws:
            ctype = self._content_type()
        if ctype is not None:
            ctype = _header("content-type", ctype)[1].decode("latin-1")  # as the server will read it
            headers.append(("content-type", ctype))
        if "encoding" in self.flaws:
            encoding = self.rng.choice(["gzip", "br", "deflate", "identity", "gzip, gzip", self.v.text()])
            body = gzip.compress(body) if encoding == "gzip" and self.v.chance(0.5) else body
            headers.append(("content-encoding", encoding))
        if method in ("GET", "HEAD") and "auth" in self.flaws and self.v.chance(0.3):
            query, authorization = self._bewit(path, query), None
        else:
            authorization = self._authorization(method, path, query, body, ctype or "")
        if authorization is not None:
            headers.append(("authorization", authorization))
        if "range" in self.flaws:
            headers.append((self.rng.choice(ARTIFACT_HEADERS), self._range_value()))
        return self._envelope(method, path, query, headers, body)

    def _envelope(
        self, method: str, path: str, query: str, headers: list[tuple[str, str | bytes]], body: bytes
    ) -> Req:
        """Content-Length, odd headers and the body's chunks, as the flaws say."""
        v, rng = self.v, self.rng
        if "length" in self.flaws:
            headers.append(("content-length", self._length_value(len(body))))
            if v.chance(0.3):
                headers.append(("content-length", str(len(body))))
        elif body or v.chance(0.5):
            headers.append(("content-length", str(len(body))))
        if "headers" in self.flaws:
            headers.append(rng.choice(headers) if v.chance(0.5) else (v.text() or "x", v.text()))
        if "host" in self.flaws:
            headers = self._odd_host(headers)
        chunks, hang_up = 1, False
        if "chunks" in self.flaws:
            chunks, hang_up = rng.choice([2, 7, 100]), v.chance(0.2)
        return Req(method, path, query, tuple(_header(n, x) for n, x in headers), body, chunks, hang_up)

    def _odd_host(self, headers: list[tuple[str, str | bytes]]) -> list[tuple[str, str | bytes]]:
        rng = self.rng
        value = rng.choice(["", "[::1", "testserver:99999999", "testserver:\u00b2", "x:-1", "testserver:80"])
        name = rng.choice(["host", "x-forwarded-port", "x-forwarded-proto"])
        if name != "host":
            value = rng.choice([self.v.number_text(), "https", "", "http, https"])
        return [(n, x) for n, x in headers if n != name] + [(name, value)]

    def _length_value(self, actual: int) -> str:
        return self.v.pick(
            [
                (3, self.v.number_text),
                (1, lambda: str(actual + self.rng.choice([-1, 1, 1000]))),
                (1, lambda: f"{actual}, {actual}"),
                (1, lambda: "1" * self.rng.choice([19, 5000])),
            ]
        )

    def _range_value(self) -> str:
        rng = self.rng
        return self.v.pick(
            [
                (
                    3,
                    lambda: rng.choice(
                        [
                            "bytes=0-0",
                            "bytes=5-1",
                            "bytes=-0",
                            "bytes=0-",
                            "bytes=-1",
                            "bytes=0-1,2-3",
                            "bytes=1-0,0-1",
                        ]
                    ),
                ),
                (1, lambda: "bytes=" + self.v.number_text() + "-" + self.v.number_text()),
                (1, lambda: rng.choice(['"x"', "*", 'W/"x"', "Mon, 99 Foo 2024 00:00:00 GMT", "items=0-1"])),
                (1, self.v.text),
            ]
        )

    def _authorization(self, method: str, path: str, query: str, body: bytes, ctype: str) -> str | None:
        """Root's valid Hawk header, unless the flaws say otherwise; none at all one time in five."""
        v, rng = self.v, self.rng
        if v.chance(0.2):
            return None
        flawed = "auth" in self.flaws
        if flawed and v.chance(0.2):
            return v.text() if v.chance(0.5) else None
        creds = rng.choice(self.state.others) if flawed and v.chance(0.4) else self.state.root
        hashed = body if hawk._media_type(ctype) == "application/json" else b""
        mac_input = hawk.MacInput(
            ts=str(self.state.now // 1000),
            nonce=v.nonce(),
            method=method,
            resource=path + ("?" + query if query else ""),
            host=HOST,
            port=80,
            hash=hawk.payload_hash(hashed.decode("utf-8", "replace").encode(), ctype)
            if v.chance(0.8)
            else "",
            ext=v.ext(creds.certificate) if flawed or creds.certificate else "",
        )
        header = v.hawk_header(mac_input, creds.client_id, creds.key)
        return v.mutate_header(header) if flawed and v.chance(0.5) else header

    def _bewit(self, path: str, query: str) -> str:
        """`query` with a bewit (Hawk in the URL) of root's, valid or with one part changed."""
        v, root = self.v, self.state.root
        exp = str(self.state.now // 1000 + 600)
        mac_input = hawk.MacInput(exp, "", "GET", path + ("?" + query if query else ""), HOST, 80)
        parts = [root.client_id, exp, hawk.calculate_mac("bewit", root.key, mac_input), ""]
        if v.chance(0.6):
            parts[self.rng.randrange(4)] = v.attribute()
        raw = "\\".join(parts).encode("utf-8", "surrogatepass")
        bewit = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        bewit = bewit if v.chance(0.9) else v.url_part(v.text())
        return (query + "&" if query else "") + "bewit=" + bewit

    # Signed URLs ------------------------------------------------------------------------------

    def _signed(self, url: str) -> tuple[str, list[tuple[str, str]]]:
        """A signed URL's path and query pairs, the pairs mutated if the signature is a flaw."""
        path, _, query = url.partition("?")
        pairs = [(n, x) for n, _, x in (p.partition("=") for p in query.split("&"))]
        if "signature" in self.flaws:
            i = self.rng.randrange(len(pairs))
            name = pairs[i][0]
            pairs[i] = (name, self.v.number_text() if name == "e" else self.v.text())
            if self.v.chance(0.2):
                pairs.pop(self.rng.randrange(len(pairs)))
        return path[len("http://" + HOST) :], pairs

    def _blob(self, method: str) -> Req:
        v = self.v
        key = self.rng.choice(self.state.blob_keys)
        if "path" in self.flaws:
            key = self.rng.choice(
                [v.text(), key + "/" + v.text(), v.text() + "/" + key, "a/b/c", "../" + key]
            )
            key = as_served(key)
        if method == "PUT":
            url = self.rng.choice(self.state.put_urls)
            key = url.split("/_blobs/")[1].split("?")[0] if "path" not in self.flaws else key
        else:
            url = self.state.sign_blob_get(key, self.state.now + dates.HOUR)
        path, pairs = self._signed(url)
        if "reshape" in self.flaws or (method == "PUT" and "path" in self.flaws):
            path = "/api/queue/v1/_blobs/" + v.url_part(key)
        query = self._query(pairs) if "query" in self.flaws else qs(pairs)
        headers: list[tuple[str, str | bytes]] = [("host", HOST)]
        body = b""
        if method != "GET":
            body = v.pick([(3, lambda: b"blob body"), (1, lambda: v.raw_bytes(2000)), (1, v.sized)])
            flawed = "content-type" in self.flaws
            headers.append(("content-type", v.text() if flawed else "text/plain"))
        if "range" in self.flaws or v.chance(0.1):
            headers.append((self.rng.choice(ARTIFACT_HEADERS), self._range_value()))
        if "encoding" in self.flaws:
            headers.append(("content-encoding", self.rng.choice(["gzip", "identity", v.text()])))
        return self._envelope(method, path, query, headers, body)

    def _livelog(self, method: str) -> Req:
        v = self.v
        task_id, run = self.rng.choice(self.state.good["taskId"]), "0"
        if "path" in self.flaws:
            task_id, run = (v.text(), run) if v.chance(0.5) else (task_id, v.number_text())
            task_id, run = as_served(task_id), as_served(run)
        path, pairs = self._signed(self.state.sign_livelog(task_id, run, self.state.now + dates.HOUR))
        if "reshape" in self.flaws:
            path = "/api/queue/v1/_livelog/" + v.url_part(task_id) + "/" + v.url_part(run)
        pairs.append(("follow", self.rng.choice(["0", "0", "1", v.text()])))
        query = self._query(pairs) if "query" in self.flaws else qs(pairs)
        body = v.raw_bytes(100) if "body" in self.flaws else b""
        return self._envelope(method, path, query, [("host", HOST)], body)


def as_served(text: str) -> str:
    """`text` as the server reads it back from a URL path: lone surrogates become U+FFFD."""
    return unquote(quote(text, safe="/", errors="surrogatepass"))


def qs(pairs: list[tuple[str, str]]) -> str:
    """A query string; lone surrogates are sent as the bytes Python would make of them."""
    return urlencode(pairs, errors="surrogatepass")


def _header(name: str, value: str | bytes) -> tuple[bytes, bytes]:
    """A header as h11 admits it: no control characters, no surrounding whitespace."""
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    clean = bytes(b for b in raw if (b >= 0x20 and b != 0x7F) or b == 0x09).strip(b" \t")
    token = "".join(c for c in name if c.isascii() and (c.isalnum() or c in "!#$%&'*+-.^_`|~")) or "x"
    return token.lower().encode(), clean
