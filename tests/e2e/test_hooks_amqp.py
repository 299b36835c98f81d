"""Hooks on RabbitMQ (`taskyard serve --events amqp://...`), driven by `taskcluster.Hooks`: a hook
bound to an exchange fires on a message any AMQP client publishes there, its body the payload;
createHook, updateHook and removeHook announce themselves on the hooks exchanges."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pika
import taskcluster

from tests.conftest import RABBITMQ_URL
from tests.e2e.bus import Listener, server
from tests.e2e.conftest import Server
from tests.e2e.helpers import grant, hook_body, unique, wait_for

__all__ = ["server"]  # the module's server, publishing to the shared RabbitMQ

HOOKS = "exchange/taskcluster-hooks/v1/"


def publish(exchange: str, routing_key: str, body: dict[str, Any]) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange, "topic", durable=True)
        channel.basic_publish(exchange, routing_key, orjson.dumps(body))
    finally:
        connection.close()


def test_a_binding_fires_on_a_rabbitmq_message(server: Server) -> None:
    hooks = taskcluster.Hooks(server.options())
    group, hook = unique(), "amqp"
    grant(server, group, hook)
    exchange = f"exchange/e2e-hooks/{uuid.uuid4().hex[:10]}"
    bindings = [{"exchange": exchange, "routingKeyPattern": "build.*.done"}]
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    task = {
        "$let": {"taskQueue": "e2e/hooks"},
        "in": {**hook_body("x")["task"]["in"], "tags": {"n": "${payload.n}"}},
    }
    hooks.createHook(
        group, hook, {**hook_body("x"), "task": task, "bindings": bindings, "triggerSchema": schema}
    )
    sent: list[int] = []

    def fired() -> list[dict[str, Any]] | None:
        try:
            return hooks.listLastFires(group, hook)["lastFires"]
        except taskcluster.TaskclusterRestFailure:
            publish(exchange, "build.other.failed", {"n": -1})  # not bound: never fires
            publish(exchange, "build.linux.done", {"wrong": True})  # refused by triggerSchema: dropped
            sent.append(len(sent))
            publish(exchange, "build.linux.done", {"n": sent[-1]})
            return None

    fires = wait_for(fired, what="a fire from a RabbitMQ message", timeout=60, every=0.5)
    assert all(f["firedBy"] == "pulseMessage" and f["result"] == "success" for f in fires), fires
    tags = {server.client().task(f["taskId"])["tags"]["n"] for f in fires}
    assert tags <= {str(n) for n in sent}
    hooks.removeHook(group, hook)


def test_hook_changes_are_published(server: Server) -> None:
    hooks = taskcluster.Hooks(server.options())
    group = unique()
    names = ("hook-created", "hook-updated", "hook-deleted")
    with Listener([(HOOKS + name, "#") for name in names]) as listener:
        hooks.createHook(group, "h", hook_body("x"))
        hooks.updateHook(group, "h", hook_body("y"))
        hooks.removeHook(group, "h")
        mine = lambda events: [e for e in events if e.body.get("hookGroupId") == group]  # noqa: E731
        events = mine(listener.wait_for(lambda ev: len(mine(ev)) == 3, what="three hook events"))
    assert [e.exchange for e in events] == [HOOKS + name for name in names]
    assert all(e.body == {"hookGroupId": group, "hookId": "h"} for e in events)
