"""The notify service through TaskCluster's `Notify` client against `taskyard serve`, with a real
SMTP server (aiosmtpd) receiving what it sends: the API's email, pulse and denylist, task routes
on each resolution, the denylist suppressing, a kill -9 before sending, and bad input."""

from __future__ import annotations

import email
import email.policy
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import orjson
import pika
import pytest
import taskcluster
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.conftest import RABBITMQ_URL, need_rabbitmq
from tests.e2e.bus import EVENTS_URL
from tests.e2e.conftest import ROOT_CLIENT_ID, TASKYARD, Server, start_server
from tests.e2e.helpers import claim_one, create, refused, slug, wait_for
from tests.ports import free_port

USER, PASSWORD = "mailer", "s3cret-pw"
# The test SMTP server takes AUTH without TLS (a loopback test server has no certificate).
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


class Inbox:
    """What the SMTP server received, as parsed messages, with their envelope recipients."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        parsed = email.message_from_bytes(envelope.original_content or b"", policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        with self.lock:
            self.messages.append((list(envelope.rcpt_tos), parsed))
        return "250 OK"

    def to(self, address: str) -> list[EmailMessage]:
        with self.lock:
            return [m for rcpt, m in self.messages if address in rcpt]


def authenticator(
    server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (USER.encode(), PASSWORD.encode())
    return AuthResult(success=ok)


def smtp_server(port: int, inbox: Inbox) -> Controller:
    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticator,
        auth_required=True,
        auth_require_tls=False,
    )
    controller.start()
    return controller


@pytest.fixture(scope="module")
def inbox() -> Iterator[tuple[Inbox, int]]:
    box, port = Inbox(), free_port()
    controller = smtp_server(port, box)
    yield box, port
    controller.stop()


def smtp_url(port: int) -> str:
    return f"smtp://{USER}:{PASSWORD}@127.0.0.1:{port}?from=ci@taskyard.test"


@pytest.fixture(scope="module")
def server(
    module_db_url: str, tmp_path_factory: pytest.TempPathFactory, inbox: tuple[Inbox, int]
) -> Iterator[Server]:
    args = ["--smtp-url", smtp_url(inbox[1])]
    running = start_server(module_db_url, tmp_path_factory.mktemp("server"), name="notify", extra_args=args)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def notify(server: Server) -> taskcluster.Notify:
    return taskcluster.Notify(server.options())


def address() -> str:
    return f"{slug().lower().replace('_', 'x')}@example.test"


def resolve(
    server: Server, tq: str, outcome: str, routes: list[str], reason: str = "malformed-payload", **more: Any
) -> str:
    queue = server.client()
    task_id = create(queue, tq, routes=routes, **more)
    claim_one(queue, tq)
    if outcome == "completed":
        queue.reportCompleted(task_id, "0")
    elif outcome == "failed":
        queue.reportFailed(task_id, "0")
    else:
        queue.reportException(task_id, "0", {"reason": reason})
    return task_id


def test_email_is_sent_through_smtp_once(notify: taskcluster.Notify, inbox: tuple[Inbox, int]) -> None:
    box, _ = inbox
    to = address()
    body = {
        "address": to,
        "subject": "hello",
        "content": "**it** works",
        "link": {"text": "See", "href": "https://x.test/a"},
    }
    answer = notify.email(body)
    assert answer["response"].status_code == 200 and answer["response"].text == "OK"
    (sent,) = box.to(to)
    assert sent["Subject"] == "hello" and sent["From"] == "ci@taskyard.test"
    assert "**it** works" in sent.get_content() and "https://x.test/a" in sent.get_content()
    assert notify.email(body) is None  # a duplicate: 204, not sent again
    assert len(box.to(to)) == 1


def test_ping_and_heartbeats_answer(notify: taskcluster.Notify) -> None:
    assert notify.ping()["alive"] is True
    assert notify.heartbeat() == {} and notify.lbheartbeat() == {}
    assert "version" in notify.version()


def test_the_cli_s_test_email_arrives(server: Server, inbox: tuple[Inbox, int]) -> None:
    to = address()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TASKCLUSTER_", "TASKYARD_"))},
        "TASKCLUSTER_ROOT_URL": server.root_url,
        "TASKCLUSTER_CLIENT_ID": ROOT_CLIENT_ID,
        "TASKCLUSTER_ACCESS_TOKEN": server.access_token,
    }
    done = subprocess.run(
        [str(TASKYARD), "notify", "test", "--email", to], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert f"sent a test email to {to}" in done.stdout
    (mail,) = inbox[0].to(to)
    assert mail["Subject"] == "taskyard test email"


def test_bad_input_is_a_400_naming_the_field(notify: taskcluster.Notify) -> None:
    with refused(400) as info:
        notify.email({"address": "not-an-address", "subject": "s", "content": "c"})
    assert "address" in str(info.value.body)
    with refused(400) as info:
        notify.email({"address": address(), "subject": "", "content": "c"})
    assert "subject" in str(info.value.body)
    with refused(400) as info:
        notify.pulse({"routingKey": "k", "message": "not an object"})
    assert "message" in str(info.value.body)
    with refused(400) as info:
        notify.addDenylistAddress({"notificationType": "fax", "notificationAddress": "x"})
    assert "notificationType" in str(info.value.body)
    with refused(400) as info:
        notify.slack({"channelId": "C1", "text": "hi"})
    assert "Slack" in str(info.value.body)


def test_the_denylist_refuses_at_the_api_and_lists_and_deletes(
    notify: taskcluster.Notify, inbox: tuple[Inbox, int]
) -> None:
    to = address()
    entry = {"notificationType": "email", "notificationAddress": to}
    assert notify.addDenylistAddress(entry)["response"].text == "OK"
    notify.addDenylistAddress(entry)  # again: no error
    listed = [a for a in notify.listDenylist()["addresses"] if a["notificationAddress"] == to]
    assert listed == [entry]
    with refused(400, "DenylistedAddress"):
        notify.email({"address": to, "subject": "s", "content": "c"})
    assert inbox[0].to(to) == []
    notify.deleteDenylistAddress(entry)
    assert notify.deleteDenylistAddress(entry)["response"].status_code == 200  # not there: no error
    notify.email({"address": to, "subject": "s", "content": "c"})
    assert len(inbox[0].to(to)) == 1


def test_listing_the_denylist_pages(notify: taskcluster.Notify) -> None:
    mine = sorted(f"page-{slug()}" for _ in range(3))
    for key in mine:
        notify.addDenylistAddress({"notificationType": "pulse", "notificationAddress": key})
    seen: list[str] = []
    token: str | None = None
    while True:
        query = {"limit": "2", **({"continuationToken": token} if token else {})}
        page = notify.listDenylist(query=query)
        assert len(page["addresses"]) <= 2
        seen += [a["notificationAddress"] for a in page["addresses"]]
        token = page.get("continuationToken")
        if not token:
            break
    assert [s for s in seen if s in mine] == mine


def test_task_routes_mail_on_their_events(server: Server, tq: str, inbox: tuple[Inbox, int]) -> None:
    box, _ = inbox
    on_failed, on_any, on_completed, on_exception = address(), address(), address(), address()
    routes = [
        f"notify.email.{on_failed}.on-failed",
        f"notify.email.{on_any}.on-any",
        f"notify.email.{on_completed}.on-completed",
        f"notify.email.{on_exception}.on-exception",
        "notify.slack-channel.C123.on-failed",  # no transport: refused, logged, nothing else
    ]
    failed = resolve(server, tq, "failed", routes)
    (mail,) = wait_for(lambda: box.to(on_failed), what="the on-failed email")
    assert mail["Subject"] == f"Task failed: e2e task - {failed}"
    assert f"{server.root_url}/tasks/{failed}" in mail.get_content()
    wait_for(lambda: box.to(on_any), what="the on-any email")
    completed = resolve(server, tq, "completed", routes)
    wait_for(lambda: box.to(on_completed), what="the on-completed email")
    wait_for(lambda: len(box.to(on_any)) == 2, what="on-any's second email")
    excepted = resolve(server, tq, "exception", routes)
    (mail,) = wait_for(lambda: box.to(on_exception), what="the on-exception email")
    assert excepted in mail["Subject"]
    wait_for(lambda: len(box.to(on_any)) == 3, what="on-any's third email")
    time.sleep(1)  # a moment for anything sent twice to arrive
    assert len(box.to(on_failed)) == 1 and len(box.to(on_completed)) == 1 and completed
    assert "taskyard has no slack-channel transport" in server.log_tail(2000)


def test_a_task_s_custom_email_is_rendered_with_json_e(
    server: Server, tq: str, inbox: tuple[Inbox, int]
) -> None:
    to = address()
    extra = {
        "notify": {
            "email": {"subject": "${task.metadata.name} went ${status.state}", "content": "id ${taskId}"}
        }
    }
    task_id = resolve(server, tq, "failed", [f"notify.email.{to}.on-failed"], extra=extra)
    (mail,) = wait_for(lambda: inbox[0].to(to), what="the custom email")
    assert mail["Subject"] == "e2e task went failed"
    assert f"id {task_id}" in mail.get_content()


def test_a_canceled_task_and_a_denylisted_address_get_nothing(
    server: Server, notify: taskcluster.Notify, tq: str, inbox: tuple[Inbox, int]
) -> None:
    box, _ = inbox
    denied, canceled, witness = address(), address(), address()
    notify.addDenylistAddress({"notificationType": "email", "notificationAddress": denied})
    queue = server.client()
    task_id = create(queue, tq, routes=[f"notify.email.{canceled}.on-exception"])
    queue.cancelTask(task_id)
    resolve(server, tq, "failed", [f"notify.email.{denied}.on-failed", f"notify.email.{witness}.on-failed"])
    wait_for(lambda: box.to(witness), what="the witness's email")
    time.sleep(1)
    assert box.to(denied) == [] and box.to(canceled) == []


@pytest.fixture(scope="module")
def rabbit_server(
    module_db_url: str, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[Server]:
    need_rabbitmq()
    if not module_db_url.startswith("sqlite"):
        pytest.skip("the pulse tests are about the bus, not the storage: SQLite alone")
    where = tmp_path_factory.mktemp("rabbit")
    shutil.copy(sqlite_template, where / "db.sqlite3")
    args = ["--events", EVENTS_URL]
    running = start_server(
        f"sqlite:///{where / 'db.sqlite3'}", where / "data", name="notify-amqp", extra_args=args
    )
    yield running
    running.stop()


def test_pulse_messages_reach_rabbitmq_from_the_api_and_task_routes(rabbit_server: Server, tq: str) -> None:
    key = f"e2e.{slug()}"
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    channel = connection.channel()
    exchange = "exchange/taskcluster-notify/v1/notification"
    channel.exchange_declare(exchange, "topic", durable=True)
    queue_name = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
    channel.queue_bind(queue_name, exchange, f"route.{key}")
    got: list[tuple[str, bytes]] = []

    def take() -> list[tuple[str, bytes]]:
        while True:
            method, _, body = channel.basic_get(queue_name, auto_ack=True)
            if method is None:
                return got
            got.append((method.routing_key, body))

    notify = taskcluster.Notify(rabbit_server.options())
    assert notify.pulse({"routingKey": key, "message": {"hello": 1}})["response"].text == "OK"
    assert notify.pulse({"routingKey": key, "message": {"hello": 1}}) is None  # a duplicate: 204
    denied = {"notificationType": "pulse", "notificationAddress": f"{key}.denied"}
    notify.addDenylistAddress(denied)
    with refused(400, "DenylistedAddress"):
        notify.pulse({"routingKey": f"{key}.denied", "message": {}})
    ((routing_key, body),) = wait_for(take, what="the API's pulse message")
    assert routing_key == f"primary.{key}"  # delivered by its CC, route.<key>
    assert orjson.loads(body) == {"version": 1, "message": {"hello": 1}}
    task_id = resolve(rabbit_server, tq, "completed", [f"notify.pulse.{key}.on-resolved"])
    wait_for(lambda: len(take()) == 2, what="the task route's pulse message")
    message = orjson.loads(got[1][1])["message"]
    assert (message["taskId"], message["state"]) == (task_id, "completed")
    connection.close()


def test_email_without_smtp_is_refused_not_pretended(tmp_path: Path, sqlite_template: Path) -> None:
    db = tmp_path / "db.sqlite3"
    shutil.copy(sqlite_template, db)
    bare = start_server(f"sqlite:///{db}", tmp_path / "bare", name="no-smtp")
    try:
        with refused(400) as info:
            taskcluster.Notify(bare.options()).email({"address": address(), "subject": "s", "content": "c"})
        assert "--smtp-url" in str(info.value.body)
    finally:
        bare.stop()


def test_a_notification_is_sent_once_after_a_kill_9_before_sending(
    db_url: str, tmp_path: Path, tq: str
) -> None:
    """The SMTP server is down when the task fails: the notification waits, recorded; the server is
    killed; with SMTP back, the restarted server sends it, once."""
    port = free_port()
    to = address()
    args = ["--smtp-url", smtp_url(port)]
    first = start_server(db_url, tmp_path / "a", name="before-kill", extra_args=args)
    try:
        resolve(first, tq, "failed", [f"notify.email.{to}.on-failed"])
        wait_for(lambda: f"{to}.on-failed not sent" in first.log_tail(5000), what="a failed try")
    finally:
        assert first.process is not None
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait()
        first.stop()
    box = Inbox()
    controller = smtp_server(port, box)
    try:
        second = start_server(
            db_url, tmp_path / "b", name="after-kill", extra_args=args, access_token=first.access_token
        )
        try:
            (mail,) = wait_for(lambda: box.to(to), what="the email after the restart", timeout=30)
            assert mail["Subject"].startswith("Task failed:")
            second.stop()  # a clean stop, and a third start: nothing is sent again
            third = start_server(
                db_url, tmp_path / "c", name="again", extra_args=args, access_token=first.access_token
            )
            time.sleep(2)
            third.stop()
            assert len(box.to(to)) == 1
        finally:
            second.stop()
    finally:
        controller.stop()


def test_a_pools_owner_hears_of_its_errors_when_it_asks(
    server: Server, inbox: tuple[Inbox, int], tq: str
) -> None:
    box, _ = inbox
    wm = taskcluster.WorkerManager(server.options())
    owner, quiet = address(), address()
    for pool, to, asks in ((tq, owner, True), (tq + "-quiet", quiet, False)):
        body = {"providerId": "static", "description": "-", "config": {}, "owner": to, "emailOnError": asks}
        wm.createWorkerPool(pool, body)
        report = {"workerGroup": "rack", "workerId": "w1", "kind": "disk-full", "title": "no room"}
        wm.reportWorkerError(pool, {**report, "description": "/ is full", "extra": {}})
    (sent,) = wait_for(lambda: box.to(owner), what="the pool error's mail")
    assert sent["Subject"] == f"Worker pool {tq}: no room"
    assert "/ is full" in sent.get_content() and "rack/w1" in sent.get_content()
    time.sleep(0.5)
    assert box.to(quiet) == []


def test_a_hooks_owner_hears_of_a_scheduled_fire_that_failed(
    server: Server, inbox: tuple[Inbox, int], tq: str
) -> None:
    box, _ = inbox
    hooks = taskcluster.Hooks(server.options())
    owner, quiet = address(), address()
    task = {
        "taskQueueId": tq,
        "payload": {},
        "metadata": {"name": "n", "description": "d", "owner": "o@example.test", "source": "https://x.test"},
    }
    group = f"mail-{slug().lower().replace('_', 'x')[:10]}"
    for hook, to, asks in (("asks", owner, True), ("quiet", quiet, False)):
        metadata = {"name": hook, "description": "-", "owner": to, "emailOnError": asks}
        # Every second, and its role holds nothing: each fire fails.
        hooks.createHook(group, hook, {"metadata": metadata, "schedule": ["* * * * * *"], "task": task})
    sent = wait_for(lambda: box.to(owner), what="the failed fire's mail", timeout=30)
    assert sent[0]["Subject"] == f"Hook {group}/asks failed to create a task"
    assert "does not have sufficient scopes" in sent[0].get_content()
    hooks.removeHook(group, "asks")
    hooks.removeHook(group, "quiet")
    assert box.to(quiet) == []
