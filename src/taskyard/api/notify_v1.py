"""The notify service's routes, under `/api/notify/v1`: TaskCluster's notify API.

email and pulse answer 200 with the text body `OK` when sent, 204 when suppressed (a duplicate,
over the email rate limit), 400 DenylistedAddress for a denylisted address, as TaskCluster's do. matrix and
slack are refused with a 400 naming the transport taskyard has not.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from taskyard.api import queue_v1
from taskyard.api.routing import Body, Call, Reply, Route
from taskyard.model import paging, schema
from taskyard.model.errors import InputError
from taskyard.model.notify_routes import EMAIL, Email
from taskyard.model.types import LooseJSON
from taskyard.notify import sending

OK = Reply(200, text="OK")
SUPPRESSED = Reply(204)
EMAIL_PATTERN = "^" + EMAIL.pattern + "$"


async def ping(call: Call) -> Body:
    return {"alive": True, "uptime": call.services.uptime()}


class Link(TypedDict):
    text: str
    href: str


class EmailRequest(TypedDict):
    address: str
    subject: str
    content: str
    link: NotRequired[Link]
    replyTo: NotRequired[str]
    template: NotRequired[str]


class PulseRequest(TypedDict):
    routingKey: str
    message: LooseJSON


class DenylistRequest(TypedDict):
    notificationType: str
    notificationAddress: str


EMAIL_REQUEST = schema.obj(
    {
        "address": schema.string(pattern=EMAIL_PATTERN, max_length=320),
        "subject": schema.string(min_length=1, max_length=255),
        "content": schema.string(min_length=1, max_length=102400),
        "link": schema.obj(
            {
                "text": schema.string(min_length=1, max_length=40),
                "href": schema.string(
                    pattern="^[a-zA-Z][a-zA-Z0-9+.-]*:[^\\s]+$", min_length=1, max_length=1024
                ),
            },
            required=["text", "href"],
            additional=False,
        ),
        "replyTo": schema.string(pattern=EMAIL_PATTERN, max_length=320),
        "template": schema.enum("simple", "fullscreen"),
    },
    required=["address", "subject", "content"],
    additional=False,
)
PULSE_REQUEST = schema.obj(
    {"routingKey": schema.string(min_length=1, max_length=255), "message": schema.any_object()},
    required=["routingKey", "message"],
    additional=False,
)
DENYLIST_REQUEST = schema.obj(
    {
        "notificationType": schema.enum(*sending.TYPES),
        "notificationAddress": schema.string(min_length=1, max_length=1000),
    },
    required=["notificationType", "notificationAddress"],
    additional=False,
)
DENYLIST_LIST = schema.obj(
    {
        "addresses": schema.array(
            schema.obj(
                {"notificationType": schema.string(), "notificationAddress": schema.string()},
                required=["notificationType", "notificationAddress"],
                additional=False,
            )
        ),
        "continuationToken": schema.string(),
    },
    required=["addresses"],
    additional=False,
)
MATRIX_REQUEST = schema.obj(
    {"roomId": schema.string(min_length=1), "body": schema.string(min_length=1)}, required=["roomId", "body"]
)
SLACK_REQUEST = schema.obj(
    {"channelId": schema.string(min_length=1), "text": schema.string()}, required=["channelId", "text"]
)


async def email(call: Call) -> Reply:
    body = call.body_as(EmailRequest)
    link = body.get("link")
    mail_ = Email(body["subject"], body["content"], (link["text"], link["href"]) if link else None)
    sent = await sending.email(call.services.notify, body["address"], mail_, reply_to=body.get("replyTo"))
    return OK if sent else SUPPRESSED


async def pulse(call: Call) -> Reply:
    body = call.body_as(PulseRequest)
    sent = await sending.pulse(call.services.notify, body["routingKey"], body["message"])
    return OK if sent else SUPPRESSED


async def matrix(call: Call) -> Reply:
    raise InputError("taskyard has no Matrix transport: notifications go by email or pulse")


async def slack(call: Call) -> Reply:
    raise InputError("taskyard has no Slack transport: notifications go by email or pulse")


async def add_denylist(call: Call) -> Reply:
    body = call.body_as(DenylistRequest)
    await sending.add_denylist(call.services.notify, body["notificationType"], body["notificationAddress"])
    return OK


async def delete_denylist(call: Call) -> Reply:
    body = call.body_as(DenylistRequest)
    await sending.delete_denylist(call.services.notify, body["notificationType"], body["notificationAddress"])
    return OK


async def list_denylist(call: Call) -> Body:
    return await sending.list_denylist(call.services.notify, paging.parse(call.query))


MANAGE = "notify:manage-denylist"

ROUTES = [
    Route("GET", "/ping", "ping", ping),
    Route("GET", "/__heartbeat__", "heartbeat", queue_v1.empty),
    Route("GET", "/__lbheartbeat__", "lbheartbeat", queue_v1.empty),
    Route("GET", "/__version__", "version", queue_v1.version),
    Route("POST", "/email", "email", email, "notify:email:<address>", EMAIL_REQUEST, scope_body=("address",)),
    Route(
        "POST",
        "/pulse",
        "pulse",
        pulse,
        "notify:pulse:<routingKey>",
        PULSE_REQUEST,
        scope_body=("routingKey",),
    ),
    Route(
        "POST",
        "/matrix",
        "matrix",
        matrix,
        "notify:matrix-room:<roomId>",
        MATRIX_REQUEST,
        scope_body=("roomId",),
    ),
    Route(
        "POST",
        "/slack",
        "slack",
        slack,
        "notify:slack-channel:<channelId>",
        SLACK_REQUEST,
        scope_body=("channelId",),
    ),
    Route("POST", "/denylist/add", "addDenylistAddress", add_denylist, MANAGE, DENYLIST_REQUEST),
    Route("DELETE", "/denylist/delete", "deleteDenylistAddress", delete_denylist, MANAGE, DENYLIST_REQUEST),
    Route("GET", "/denylist/list", "listDenylist", list_denylist, MANAGE, output=DENYLIST_LIST),
]
