"""Sending email through the deployment's SMTP server (`--smtp-url`).

`smtp://user:password@host:port` upgrades to TLS when the server offers STARTTLS;
`smtps://` speaks TLS from the start. A `?from=` parameter sets the sender (default
`taskyard@<host>`). smtplib blocks, so each message is sent in a thread.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

from taskyard.model.errors import ConfigError

SCHEMES = {"smtp": 25, "smtps": 465}
TIMEOUT = 30.0


class MailError(Exception):
    """The SMTP server did not take the message."""


@dataclass(frozen=True)
class Smtp:
    scheme: str
    host: str
    port: int
    user: str
    password: str
    sender: str

    def __repr__(self) -> str:  # never the password
        return f"Smtp({self.scheme}://{self.host}:{self.port})"


def redact(url: str) -> str:
    """`url` without its password, for messages."""
    if "@" not in url:
        return url
    head, _, host = url.rpartition("@")
    scheme, sep, userinfo = head.partition("://")
    return f"{scheme}{sep}{userinfo.partition(':')[0]}:***@{host}" if sep else "***@" + host


def parse_url(url: str, option: str = "smtp-url") -> Smtp:
    """The SMTP server `url` names; a ConfigError naming `option` when it names none."""
    rule = "must be smtp://user:password@host:port or smtps://... (optionally ?from=address)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(option, redact(url), rule) from None
    if parts.scheme not in SCHEMES or not parts.hostname or parts.path not in ("", "/") or port == 0:
        raise ConfigError(option, redact(url), rule)
    query = parse_qs(parts.query)
    sender = query.get("from", [f"taskyard@{parts.hostname}"])[0]
    return Smtp(
        parts.scheme,
        parts.hostname,
        port or SCHEMES[parts.scheme],
        unquote(parts.username or ""),
        unquote(parts.password or ""),
        sender,
    )


def check_url(url: str) -> str:
    """`url` unchanged if empty (no SMTP) or usable, else a ConfigError."""
    if url:
        parse_url(url)
    return url


def message(smtp: Smtp, to: str, subject: str, text: str, reply_to: str | None = None) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = smtp.sender
    msg["To"] = to
    msg["Subject"] = subject
    if reply_to:
        msg["Reply-To"] = reply_to
    msg.set_content(text)
    return msg


async def send(smtp: Smtp, msg: EmailMessage) -> None:
    """Hand `msg` to the SMTP server; MailError if it does not take it."""
    try:
        await asyncio.to_thread(_send, smtp, msg)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailError(f"SMTP server {smtp.host}:{smtp.port}: {exc}") from exc


def _send(smtp: Smtp, msg: EmailMessage) -> None:
    context = ssl.create_default_context()
    client: smtplib.SMTP
    if smtp.scheme == "smtps":
        client = smtplib.SMTP_SSL(smtp.host, smtp.port, timeout=TIMEOUT, context=context)
    else:
        client = smtplib.SMTP(smtp.host, smtp.port, timeout=TIMEOUT)
    with client:
        client.ehlo()
        if smtp.scheme == "smtp" and client.has_extn("starttls"):
            client.starttls(context=context)
            client.ehlo()
        if smtp.user:
            client.login(smtp.user, smtp.password)
        client.send_message(msg)
