"""Hostile requests at every route the app serves: never a 5xx, never a hang, every 4xx a JSON error.

The routes come from the built app (`fuzz_targets.targets`): every service's table (queue, auth,
scheduler), the index pages, the signed `_blobs` and `_livelog` URLs and the poll protocol's
Azure-queue endpoint (whose 4xx must be Azure's XML error instead), each with its own method and
with wrong ones (HEAD, OPTIONS, PATCH ...). Requests are sent as a server hands them over
(`fuzzing.send`), signed with valid root credentials, with a task's temporary credentials, with
mutated Hawk headers, or not at all. Paths, queries, bodies (valid ones from the schemas, mutated
field by field; broken JSON; bodies at the size limit), headers and encodings are all fuzzed.

A run is fixed by its seed. `TASKYARD_FUZZ_COUNT` sets how many requests (default `COUNT`;
PostgreSQL gets a quarter as many) and `TASKYARD_FUZZ_SEED` the seed. A failure prints the seed,
the request's number and the request itself; rerunning with the same seed and a count of that
number plus one replays it, and the printed `Req(...)` can be sent again by `fuzzing.send`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

import orjson
import pytest
from starlette.applications import Starlette
from starlette.routing import Route as StarletteRoute

from taskyard.api.app import build_app
from taskyard.artifacts.local import LocalStore
from taskyard.hooks import definitions as hook_definitions
from taskyard.index import entries
from taskyard.model import dates, schema, slugid, task_definition
from taskyard.model.index_paths import Entry
from taskyard.queue.livelogs import StreamUrls
from taskyard.ui.app import Pages
from tests.api import fuzz_azure, fuzz_graphs
from tests.api.conftest import GOOD_PARAMS, ROOT, TASK_QUEUE_ID, Api, Credentials
from tests.api.fuzz_targets import (
    FUZZ_POOL,
    TABLES,
    Builder,
    Creds,
    State,
    Target,
    targets,
    uncovered,
    valid_bodies,
)
from tests.api.fuzz_values import Values
from tests.api.fuzzing import Answer, Crash, Hang, Req, Watchdog, send
from tests.conftest import SECRET_KEY, FakeClock

SEED = 20261123
COUNT = 12000  # about 20 s on SQLite, and 3000 on PostgreSQL about 10 s, on a 2-core machine
PG_SHARE = 4  # PostgreSQL gets COUNT // PG_SHARE: the same code, a second driver's errors
BODY_LIMIT = 256 * 1024  # small enough that bodies at and over it are cheap to send often
BLOB_LIMIT = 1000
HANG_SECONDS = 60.0  # a request this slow is hung: a normal one takes milliseconds
MAX_SHOWN = 20
UPLOADS = 20  # upload URLs for the fuzzer to use up
OTHER_TASK_QUEUE = "fuzz-prov/fuzz-other"
KNOWN_TASKS = 6  # the tasks requests aim at: arrange()'s two, then the newest the run created


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


@pytest.fixture
def blobs(tmp_path: Path, clock: FakeClock) -> LocalStore:
    return LocalStore(
        str(tmp_path / "blobs"), "http://testserver", SECRET_KEY, max_bytes=BLOB_LIMIT, clock=clock
    )


# A hook for the hooks service's routes to find: fired by hand, its task in the fuzzer's queue.
HOOK: Any = {
    "metadata": {"name": "fuzz", "description": "fuzzed", "owner": "fuzz@example.test"},
    "schedule": [],
    "task": {
        "taskQueueId": TASK_QUEUE_ID,
        "payload": {"x": "${payload}"},
        "metadata": {"name": "fuzz", "description": "d", "owner": "fuzz@example.test", "source": "https://x"},
    },
    "triggerSchema": {"type": "object"},
}


def fuzzed_app(api: Api) -> Starlette:
    services = dataclasses.replace(api.services, max_body_bytes=BODY_LIMIT)
    services.queue.config = dataclasses.replace(services.queue.config, claim_work_timeout=0.02)
    return build_app(services, Pages(services))  # with the web UI, whose pages are fuzzed too


async def arrange(api: Api, store: LocalStore, live_log_urls: StreamUrls) -> State:
    """Records for the requests to find: a claimed task with a live log and a blob, a client, a role."""
    await api.create_task(GOOD_PARAMS["taskId"])
    claimed = await api.call(
        "POST", f"/claim-work/{quote(TASK_QUEUE_ID, safe='')}", {"workerGroup": "wg", "workerId": "w"}
    )
    (claim,) = claimed.json()["tasks"]
    task_creds = Credentials.from_response(claim["credentials"])
    other, _ = await api.create_task()
    task_id = GOOD_PARAMS["taskId"]
    logged = await api.call(
        "POST",
        f"/task/{task_id}/runs/0/live-log/public/logs/live.log",
        {"offset": 0, "data": "hi\n"},
        creds=task_creds,
    )
    assert logged.status_code == 200, logged.text
    expires = dates.to_iso(api.clock() + dates.HOUR)
    put_urls = await artifacts(api, task_id, expires)
    client_token = await auth_records(api, expires)
    graphs = await task_graphs(api)
    azure = await poll_queues(api)
    indexed = Entry(task_id, 0, {"k": "v"}, api.clock() + dates.HOUR)
    await entries.insert_task(api.services.index, "fuzz.latest", indexed)
    hooks = api.services.hooks
    await hook_definitions.create_hook(hooks, "fuzz-group", "fuzz-hook", HOOK, client_id=ROOT.client_id)
    token = hook_definitions.open_token(hooks, await hook_definitions.load(hooks, "fuzz-group", "fuzz-hook"))
    await worker_pool(api)

    def sign_livelog(task: str, run: str, until: int) -> str:
        signature = live_log_urls.signer.sign((task, run, str(until)))
        path = f"/api/queue/v1/_livelog/{quote(task, safe='')}/{quote(run, safe='')}"
        return f"http://testserver{path}?{urlencode({'e': until, 's': signature})}"

    cert = orjson.loads(task_creds.certificate or "null")
    good = {k: [v] for k, v in GOOD_PARAMS.items()}
    good |= {
        "taskId": [task_id, other],
        "runId": ["0", "1"],
        "name": ["public/fuzz.txt", "public/logs/live.log", "public/ref", "private/x"],
        "clientId": ["fuzz/client", "fuzz/other"],
        "roleId": ["fuzz-role", "client-id:fuzz/client"],
        "key": [f"{task_id}/0/public/fuzz.txt"],
        "taskGraphId": [*graphs, slugid.nice()],
        "queue": azure.names(),
        "message_id": [m.message_id for m in azure.messages],
        "rest": ["x"],
        "indexPath": ["fuzz.latest", "fuzz.missing", "root"],
        "namespace": ["fuzz", "fuzz.latest", "fuzz.new.entry"],
        "hookGroupId": ["fuzz-group", "other-group"],
        "hookId": ["fuzz-hook", "fuzz/nested"],
        "token": [token, "not-the-token"],
        "group": ["fuzz-group", "other-group"],  # the web UI's hook pages
        "hook": ["fuzz-hook", "fuzz/nested"],
        "workerPoolId": [FUZZ_POOL, "fuzz/missing"],
    }
    return State(
        now=api.clock(),
        root=Creds(ROOT.client_id, ROOT.access_token),
        others=[
            Creds(task_creds.client_id, task_creds.access_token, cert),
            Creds("fuzz/client", client_token),
        ],
        good=good,
        blob_keys=good["key"],
        sign_blob_get=store.get_url,
        sign_livelog=sign_livelog,
        put_urls=put_urls,
        bodies=valid_bodies(api.clock()),
        graphs=graphs,
        azure=azure,
    )


async def worker_pool(api: Api) -> None:
    """A static pool with one worker, of the ids the fuzzer's bodies name."""
    bodies = valid_bodies(api.clock())
    prefix = "/api/worker-manager/v1"
    made = await api.call(
        "PUT", f"/worker-pool/{quote(FUZZ_POOL, safe='')}", bodies["createWorkerPool"], prefix=prefix
    )
    assert made.status_code == 200, made.text
    worker = f"/workers/{quote(FUZZ_POOL, safe='')}/{GOOD_PARAMS['workerGroup']}/{GOOD_PARAMS['workerId']}"
    made = await api.call("PUT", worker, bodies["createWorker"], prefix=prefix)
    assert made.status_code == 200, made.text


async def artifacts(api: Api, task_id: str, expires: str) -> list[str]:
    """Run 0's artifacts: an uploaded s3 one, a reference; answers unused upload URLs."""
    put_urls = []
    for name in ("public/fuzz.txt", *(f"public/up-{i}.txt" for i in range(UPLOADS))):
        body = {"storageType": "s3", "expires": expires, "contentType": "text/plain"}
        made = await api.call("POST", f"/task/{task_id}/runs/0/artifacts/{name}", body)
        assert made.status_code == 200, made.text
        put_urls.append(made.json()["putUrl"])
    uploaded = await api.client.put(put_urls.pop(0), content=b"x", headers={"content-type": "text/plain"})
    assert uploaded.status_code == 200, uploaded.text
    reference = {
        "storageType": "reference",
        "expires": expires,
        "url": "https://x",
        "contentType": "text/plain",
    }
    made = await api.call("POST", f"/task/{task_id}/runs/0/artifacts/public/ref", reference)
    assert made.status_code == 200, made.text
    return put_urls


async def auth_records(api: Api, expires: str) -> str:
    """A client `fuzz/client` and a role `fuzz-role`; answers the client's access token."""
    body = {"expires": expires, "description": "d", "scopes": ["queue:status:*"]}
    client = await api.call("PUT", "/clients/fuzz%2Fclient", body, prefix="/api/auth/v1")
    assert client.status_code == 200, client.text
    body = {"scopes": ["queue:get-task:*"], "description": "d"}
    role = await api.call("PUT", "/roles/fuzz-role", body, prefix="/api/auth/v1")
    assert role.status_code == 200, role.text
    return str(client.json()["accessToken"])


async def task_graphs(api: Api) -> dict[str, fuzz_graphs.Graph]:
    """A running graph in each form, with a body that extends it (and so a third, extended)."""
    now, found = api.clock(), {}
    first, second = slugid.nice(), slugid.nice()
    forms = [
        (fuzz_graphs.final_form(now, first, second), fuzz_graphs.extend_final(now, first, slugid.nice())),
        (fuzz_graphs.label_form(now), fuzz_graphs.extend_label(now)),
    ]
    for create, extend in forms:
        graph_id = slugid.nice()
        prefix = "/api/scheduler/v1/task-graph/" + graph_id
        made = await api.call("PUT", "", create, prefix=prefix)
        assert made.status_code == 200, made.text
        extended = await api.call("POST", "/extend", extend, prefix=prefix)
        assert extended.status_code == 200, extended.text
        inspected = await api.call("GET", "/inspect", prefix=prefix)
        task_ids = [t["taskId"] for t in inspected.json()["tasks"]]
        found[graph_id] = fuzz_graphs.Graph(create, extend, task_ids)
    return found


async def poll_queues(api: Api) -> fuzz_azure.Azure:
    """pollTaskUrls' queues of the fuzzer's task queue with the messages received on them, and a
    message of another task queue's (for requests that name it on the wrong queue)."""
    await api.create_task(priority="lowest")
    await api.create_task(taskQueueId=OTHER_TASK_QUEUE, priority="lowest")
    keys = api.queue.poll_keys
    assert keys is not None
    azure = fuzz_azure.Azure(await poll_urls(api, OTHER_TASK_QUEUE), [], [], signer=keys.sas)
    await receive(api, azure)
    azure.foreign, azure.messages = azure.messages, []
    azure.queues = await poll_urls(api, TASK_QUEUE_ID)
    await receive(api, azure)
    assert azure.messages and azure.foreign
    return azure


async def poll_urls(api: Api, task_queue_id: str) -> list[dict[str, str]]:
    urls = await api.call("GET", "/poll-task-url/" + task_queue_id)
    assert urls.status_code == 200, urls.text
    queues: list[dict[str, str]] = urls.json()["queues"]
    return queues


async def receive(api: Api, azure: fuzz_azure.Azure) -> None:
    """Get the messages of the lowest priority's queue, as the run learns them."""
    url = azure.queues[-1]["signedPollUrl"] + "&numofmessages=32"
    got = await api.client.get(url)
    assert got.status_code == 200, got.text
    fuzz_azure.learn(azure, Req("GET", urlsplit(url).path), Answer(200, {}, got.content))


def verdict(req: Req, answer: Answer) -> str | None:
    """What is wrong with the answer, if anything. Under the Azure-queue prefix (as the server
    decodes the path), a 4xx is Azure's XML error; outside `/api/` (the web UI) an HTML page, and a
    redirect (a form's 303) goes to a path of this site; everywhere else TaskCluster's JSON one."""
    status = answer.status
    if status == 0:
        return "no answer at all"
    if status >= 500 or status < 200:
        return f"status {status}"
    page = not unquote(req.path).startswith("/api/")  # the web UI: HTML pages and forms
    if page and 300 <= status < 400:
        where = answer.headers.get("location", "")  # a form's 303, a page's `/`: within this site
        return None if where.startswith("/") and not where.startswith("//") else f"redirect to {where!r}"
    if 300 <= status < 400 and not (
        status == 303 and "location" in answer.headers and req.method in ("GET", "HEAD")
    ):
        return f"unexpected redirect {status}"  # getArtifact's 303 only (the method flaw may reach it)
    if status < 400 or (req.method == "HEAD" and not answer.body):
        return None
    if unquote(req.path).startswith(fuzz_azure.PREFIX):
        return None if fuzz_azure.azure_error(answer) else f"{status} without Azure's XML error body"
    if answer.json_error():
        return None
    if page:  # the web UI's pages: a refusal is an HTML page saying why
        html = answer.headers.get("content-type", "").startswith("text/html")
        return None if html else f"{status} without an HTML error page"
    return f"{status} without the JSON error body"


def report(seed: int, n: int, backend: str, target: Target, req: Req, problem: str, detail: str) -> str:
    return (
        f"seed {seed}, request #{n} ({backend}), {target.name}: {problem}\n"
        f"  replay: TASKYARD_FUZZ_SEED={seed} TASKYARD_FUZZ_COUNT={n + 1} "
        f"pytest tests/api/test_fuzz.py -k {backend}\n  request: {req!r}\n  {detail[:1500]}"
    )


@dataclasses.dataclass
class Run:
    """One fuzzing run: its seed and backend, and what it found."""

    seed: int
    backend: str
    failures: list[str] = dataclasses.field(default_factory=list)
    hits: dict[str, int] = dataclasses.field(default_factory=dict)
    refused_tasks: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)  # createTask's

    def record(self, n: int, target: Target, req: Req, answer: Answer) -> None:
        problem = verdict(req, answer)
        if problem is not None:
            detail = answer.body[:1500].decode("utf-8", "replace")
            self.failures.append(report(self.seed, n, self.backend, target, req, problem, detail))
        if target.route is not None and target.route.name == "createTask" and answer.status >= 400:
            self.refused_tasks.append((unquote(req.path.rsplit("/", 1)[1]), req.body))


async def fuzz(app: Starlette, builder: Builder, chosen: list[Target], count: int, run: Run) -> None:
    with Watchdog(2 * HANG_SECONDS) as watchdog:
        for n in range(count):
            target = builder.rng.choice(chosen)
            req = builder.build(target)
            run.hits[target.name] = run.hits.get(target.name, 0) + 1
            with watchdog.watching(report(run.seed, n, run.backend, target, req, "blocked", "")):
                answer = await answer_to(app, n, target, req, run)
            if watchdog.blocked is not None:
                run.failures.append(watchdog.blocked + f"the event loop for over {watchdog.timeout} s")
                watchdog.blocked = None
            if answer is not None:
                learn(builder.state, target, req, answer)


async def answer_to(app: Starlette, n: int, target: Target, req: Req, run: Run) -> Answer | None:
    """The app's answer to request `n`, recorded in `run`; None if it hung or crashed."""
    try:
        answer = await send(app, req, timeout=HANG_SECONDS)
    except (Hang, Crash) as exc:
        problem = type(exc).__name__.lower()
        run.failures.append(report(run.seed, n, run.backend, target, req, problem, str(exc)))
        return None
    run.record(n, target, req, answer)
    return answer


def learn(state: State, target: Target, req: Req, answer: Answer) -> None:
    """What later requests may aim at: tasks and graphs the run created, messages it received."""
    if target.kind == "azure":
        fuzz_azure.learn(state.azure, req, answer)
    elif answer.status == 200 and target.route is not None and target.route.name == "createTask":
        learn_task(state, unquote(req.path.rsplit("/", 1)[1]))


def learn_task(state: State, task_id: str) -> None:
    """Aim later requests at a task the run created too, so that claims, reports and artifacts
    meet runs in every state, not only the ones `arrange` made (the newest few are kept)."""
    known = state.good["taskId"]
    known.append(task_id)
    if len(known) > KNOWN_TASKS:
        del known[2]


async def leftovers(api: Api, refused: list[tuple[str, bytes]], kept: set[str]) -> list[str]:
    """What createTask calls that were refused left behind: their task, or their task group."""
    found = []
    for task_id, body in refused:
        if slugid.is_valid(task_id) and task_id not in kept and await api.task_exists(task_id):
            found.append(f"task {task_id} left behind by a refused createTask")
        try:
            group_id = orjson.loads(body).get("taskGroupId")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if slugid.is_valid(group_id) and group_id not in kept:
            group = await api.call("GET", f"/task-group/{group_id}")
            if group.status_code != 404:
                found.append(
                    f"task group {group_id} left behind by a refused createTask: {group.status_code}"
                )
    return found


def distinct(failures: list[str]) -> list[str]:
    """The first failure of each route and problem, then others, up to MAX_SHOWN."""
    firsts: dict[str, str] = {}
    for f in failures:
        firsts.setdefault(f.split("), ", 1)[1].split("\n")[0], f)
    shown = list(firsts.values())
    return (shown + [f for f in failures if f not in shown])[:MAX_SHOWN]


@pytest.fixture
def backend(db_url: str) -> str:
    return "postgres" if db_url.startswith("postgres") else "sqlite"


async def test_hostile_requests_get_no_5xx(
    api: Api, blobs: LocalStore, live_log_urls: StreamUrls, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    seed = env_int("TASKYARD_FUZZ_SEED", SEED)
    count = env_int("TASKYARD_FUZZ_COUNT", COUNT)
    count = count if backend == "sqlite" else max(1, count // PG_SHARE)
    app = fuzzed_app(api)
    chosen = targets(app)
    state = await arrange(api, blobs, live_log_urls)
    assert not uncovered(chosen, state), "see test_every_route_the_app_serves_is_a_fuzz_target"
    builder = Builder(Values(random.Random(seed), body_limit=BODY_LIMIT), state)
    caplog.set_level(logging.ERROR)
    run = Run(seed, backend)
    await fuzz(app, builder, chosen, count, run)
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]

    # The server still answers, and still knows its records, after all that.
    assert (await api.call("GET", "/ping", creds=None)).status_code == 200
    status = await api.call("GET", f"/task/{GOOD_PARAMS['taskId']}/status")
    assert status.status_code == 200, status.text

    if run.failures:
        pytest.fail(
            f"{len(run.failures)} of {count} requests failed:\n" + "\n".join(distinct(run.failures)), False
        )
    if logged:
        pytest.fail("errors logged:\n" + "\n".join(logged[:MAX_SHOWN]), False)
    kept = {*state.good["taskId"]}
    assert not await leftovers(api, run.refused_tasks, kept)
    if count >= 10 * len(chosen):  # every route was reached, under any seed
        assert not [t.name for t in chosen if not run.hits.get(t.name)]


async def test_every_route_the_app_serves_is_a_fuzz_target(
    api: Api, blobs: LocalStore, live_log_urls: StreamUrls
) -> None:
    app = fuzzed_app(api)
    state = await arrange(api, blobs, live_log_urls)
    chosen = targets(app)
    missing = uncovered(chosen, state)
    assert not missing, "teach tests/api/fuzz_targets.py these routes:\n" + "\n".join(missing)
    assert {"table", "blob", "livelog", "azure", "index"} <= {t.kind for t in chosen}
    names = {t.route.name for t in chosen if t.route is not None}
    assert {"createTask", "claimWork", "createClient", "getArtifact", "testAuthenticate"} <= names
    assert {"createTaskGraph", "extendTaskGraph", "inspectTask", "pollTaskUrls"} <= names
    azure = {t.path for t in chosen if t.kind == "azure"}
    assert {
        fuzz_azure.PREFIX + "/{queue}/messages",
        fuzz_azure.PREFIX + "/{queue}/messages/{message_id}",
    } <= azure

    # A route it knows nothing of, added to the app, is named.
    app.router.routes.append(
        StarletteRoute("/api/widgets/v1/widgets/{widgetId}", lambda r: None, methods=["PUT"])
    )
    assert uncovered(targets(app), state) == [
        "PUT /api/widgets/v1/widgets/{widgetId}: a route of no kind the fuzzer knows",
        "PUT /api/widgets/v1/widgets/{widgetId}: no good value for {widgetId}",
    ]


def test_a_seed_names_one_run() -> None:
    def draws(seed: int) -> list[Any]:
        v = Values(random.Random(seed), body_limit=BODY_LIMIT)
        return [v.encode(v.mutate({"a": 1, "b": {"c": "d"}})) for _ in range(50)]

    assert draws(SEED) == draws(SEED)
    assert draws(SEED) != draws(SEED + 1)


def test_the_valid_bodies_pass_their_schemas() -> None:
    now = dates.now_ms()
    bodies = valid_bodies(now)
    task_definition.validate(GOOD_PARAMS["taskId"], bodies["createTask"], now=now)
    for table in TABLES.values():
        for r in table:
            if r.input is not None:
                schema.validate(r.input, bodies[r.name])


async def test_the_fuzzer_tells_a_hang_a_crash_and_a_blocked_loop() -> None:
    async def never_answers(scope: Any, receive: Any, send_: Any) -> None:
        await asyncio.Event().wait()

    async def raises(scope: Any, receive: Any, send_: Any) -> None:
        raise ValueError("a bug")

    async def blocks(scope: Any, receive: Any, send_: Any) -> None:
        time.sleep(0.3)  # no await: nothing else runs meanwhile

    with pytest.raises(Hang):
        await send(never_answers, Req("GET", "/"), timeout=0.05)
    with pytest.raises(Crash, match="ValueError: a bug"):
        await send(raises, Req("GET", "/"))
    with Watchdog(0.05, tick=0.01) as watchdog, watchdog.watching("request #7"):
        await send(blocks, Req("GET", "/"))
    assert watchdog.blocked == "request #7"
