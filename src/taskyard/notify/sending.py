"""The notify API's operations: send an email, publish a pulse message, keep the denylist.

An email goes to the SMTP server before the call answers (200), so a 200 means the server took
it; with no SMTP server configured the call is refused (400, saying so) rather than pretending. A pulse
message is written to the outbox and published by the relay, as the queue's events are: on
`exchange/taskcluster-notify/v1/notification`, keyed `primary.<routingKey>`, CC
`route.<routingKey>`. Either answers False (the API's 204) when suppressed: the same message
sent again recently by this process or (email) over the per-address rate limit. A denylisted
address or routing key is a 400 DenylistedAddress.
"""

from __future__ import annotations

import hashlib
import logging

import orjson

from taskyard.model import paging
from taskyard.model.errors import InputError, Unavailable
from taskyard.model.messages import Message
from taskyard.model.notify_routes import Email
from taskyard.model.types import LooseJSON
from taskyard.notify import mail
from taskyard.notify.service import Notify
from taskyard.queue import service as queue_service
from taskyard.storage.port import Tx, execute_alone, run_in_transaction

log = logging.getLogger(__name__)
EXCHANGE = "notification"  # the short name; the tc profile publishes it on taskcluster-notify's
TYPES = ("email", "pulse", "matrix-room", "slack-channel")


class DenylistedAddress(InputError):
    """The address is on the denylist."""

    code = "DenylistedAddress"


class NoSmtp(InputError):
    """No SMTP server is configured: a 400 (a 5xx would have clients retry what cannot succeed)."""


def _key(*parts: object) -> str:
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()


async def denylisted(nt: Notify, kind: str, address: str) -> bool:
    async with nt.storage.reader() as session:
        return await session.fetchval("is_denylisted", kind, address) is not None


async def email(nt: Notify, address: str, mail_: Email, *, reply_to: str | None = None) -> bool:
    """Send one email now (the API's `email`): True when sent, False when suppressed. 400
    DenylistedAddress if the address is denylisted or without an SMTP server; 503 when it fails."""
    if nt.smtp is None:
        raise NoSmtp(
            "no email can be sent: this deployment has no SMTP server configured "
            "(--smtp-url or TASKYARD_SMTP_URL)"
        )
    if await denylisted(nt, "email", address):
        raise DenylistedAddress(f"address {address} is denylisted for email")
    return await deliver_email(nt, address, mail_, reply_to=reply_to)


async def deliver_email(nt: Notify, address: str, mail_: Email, *, reply_to: str | None = None) -> bool:
    """Hand the email to the SMTP server unless suppressed (recent duplicate, rate limit): True
    when sent. NoSmtp without a server; Unavailable when the server does not take it."""
    if nt.smtp is None:
        raise NoSmtp("no SMTP server is configured (--smtp-url)")
    key = _key("email", address, mail_.subject, mail_.content, mail_.link, reply_to)
    if nt.seen(key):
        return False
    if nt.over_rate(address):
        log.info("email to %s dropped: over %d a window", address, 50)
        return False
    text = mail_.content
    if mail_.link is not None:
        text += f"\n\n{mail_.link[0]}: {mail_.link[1]}"
    try:
        await mail.send(nt.smtp, mail.message(nt.smtp, address, mail_.subject, text, reply_to))
    except mail.MailError as exc:
        nt.recent.pop(key, None)  # not sent: a retry is no duplicate
        raise Unavailable(f"the email was not sent: {exc}") from None
    return True


async def pulse(nt: Notify, routing_key: str, message: LooseJSON, *, dedup: bool = True) -> bool:
    """Publish `message` (the API's `pulse`): True when published, False when suppressed (a
    duplicate); 400 DenylistedAddress if the routing key is denylisted."""
    if await denylisted(nt, "pulse", routing_key):
        raise DenylistedAddress(f"pulse routing key {routing_key} is denylisted")
    if dedup and nt.seen(_key("pulse", routing_key, message)):
        return False
    await run_in_transaction(nt.storage, lambda tx: publish_tx(nt, tx, routing_key, message))
    return True


async def publish_tx(nt: Notify, tx: Tx, routing_key: str, message: LooseJSON) -> None:
    event = Message(
        EXCHANGE, f"primary.{routing_key}", {"version": 1, "message": message}, [f"route.{routing_key}"]
    )
    await queue_service.publish_tx(nt.queue, tx, [event])


async def add_denylist(nt: Notify, kind: str, address: str) -> None:
    await execute_alone(nt.storage, "add_denylist_address", kind, address)


async def delete_denylist(nt: Notify, kind: str, address: str) -> None:
    """Take the address off the denylist; one not there is no error, as in TaskCluster."""
    await execute_alone(nt.storage, "delete_denylist_address", kind, address)


async def list_denylist(nt: Notify, page: paging.Query) -> dict[str, object]:
    after = paging.after(page, 2, ["", ""])
    async with nt.storage.reader() as session:
        rows = await session.fetch("list_denylist", after[0], after[1], page.limit + 1)
    shown = rows[: page.limit]
    items = [
        {"notificationType": r["notification_type"], "notificationAddress": r["notification_address"]}
        for r in shown
    ]
    last: list[object] | None = (
        [shown[-1]["notification_type"], shown[-1]["notification_address"]] if shown else None
    )
    return {"addresses": items, **paging.more(paging.keyset_token(rows, last, page.limit))}
