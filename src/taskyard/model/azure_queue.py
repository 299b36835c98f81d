"""The poll protocol's pure rules: queue names, message texts and signatures, SAS URLs, XML bodies.

TaskCluster's first queue put a message `{taskId, runId, signature}` on an Azure Storage queue
for every pending run, one queue per task queue and priority, and handed workers SAS-signed URLs
to poll those queues. taskyard serves that Azure Queue Storage REST API itself
(`api/azure_queue.py`); this module holds what needs no I/O: how a queue is named, how a message
text and its signature are made, how a SAS is signed and checked, how answers and errors look.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from xml.sax.saxutils import escape

import orjson

from taskyard.model import dates, digits, slugid
from taskyard.model.types import Millis

SAS_VERSION = "2019-07-07"  # the oldest REST version whose answers we give
ACCOUNT = "taskyard"
QUEUE_PREFIX = "queue"
GRANTED = "rp"  # read (peek) and process (get, delete): what pollTaskUrls hands out
PERMISSION_ORDER = "raup"  # Azure's letters for a queue SAS, in its order
MAX_MESSAGES = 32
DEFAULT_VISIBILITY = 30
MAX_VISIBILITY = 7 * 24 * 3600
POLL_VISIBILITY = 300  # the visibility timeout the poll URLs ask for
URLS_VALID_MS = 30 * 60 * 1000  # pollTaskUrls' URLs expire this long after they are made
START_SKEW_MS = 15 * 60 * 1000  # their `st`, for clocks that run behind
MAX_QUERY_TEXT = 256  # longer query values are refused before anything parses them


class AzureError(Exception):
    """An answer in Azure Storage's error format: status, error code, message, detail elements."""

    def __init__(self, status: int, code: str, message: str, **details: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def authentication_failed(detail: str) -> AzureError:
    return AzureError(
        403,
        "AuthenticationFailed",
        "Server failed to authenticate the request. Make sure the value of Authorization header "
        "is formed correctly including the signature.",
        AuthenticationErrorDetail=detail,
    )


def permission_mismatch(detail: str) -> AzureError:
    return AzureError(
        403,
        "AuthorizationPermissionMismatch",
        "This request is not authorized to perform this operation using this permission.",
        AuthenticationErrorDetail=detail,
    )


def invalid_query(name: str, value: str, reason: str) -> AzureError:
    return AzureError(
        400,
        "InvalidQueryParameterValue",
        "Value for one of the query parameters specified in the request URI is invalid.",
        QueryParameterName=name,
        QueryParameterValue=value[:MAX_QUERY_TEXT],
        Reason=reason,
    )


def out_of_range(name: str, value: str, low: int, high: int) -> AzureError:
    return AzureError(
        400,
        "OutOfRangeQueryParameterValue",
        "One of the query parameters specified in the request URI is outside the permissible range.",
        QueryParameterName=name,
        QueryParameterValue=value[:MAX_QUERY_TEXT],
        MinimumAllowed=str(low),
        MaximumAllowed=str(high),
    )


def message_not_found() -> AzureError:
    return AzureError(404, "MessageNotFound", "The specified message does not exist.")


def pop_receipt_mismatch() -> AzureError:
    return AzureError(
        400,
        "PopReceiptMismatch",
        "The specified pop receipt did not match the pop receipt for a dequeued message.",
    )


# Queue names and message texts ----------------------------------------------------------------


def _hashed(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()[:15]).decode().lower()


@functools.lru_cache(maxsize=4096)
def queue_name(provisioner_id: str, worker_type: str, priority_rank: int) -> str:
    """The queue of a task queue's priority: `queue-<h(p)>-<h(wt)>-<d>`, d 7 (highest) to 1.

    h is the lowercase base32 of the first 15 bytes of a SHA-256, so every name is a valid Azure
    queue name (57 characters, lowercase letters, digits and single hyphens)."""
    return f"{QUEUE_PREFIX}-{_hashed(provisioner_id)}-{_hashed(worker_type)}-{priority_rank}"


@functools.lru_cache(maxsize=4096)
def queue_names(task_queue_id: str) -> tuple[str, ...]:
    """Every priority's poll queue of `provisionerId/workerType`, highest first."""
    provisioner_id, _, worker_type = task_queue_id.partition("/")
    return tuple(queue_name(provisioner_id, worker_type, rank) for rank in range(7, 0, -1))


class Signatures:
    """A message's signature (docs/poll.md, Messages): base64 HMAC-SHA256 over `<taskId>/<runId>` with a
    server-side key derived from the deployment's secret key."""

    def __init__(self, secret_key: str) -> None:
        self._key = hashlib.sha256(b"taskyard-poll-message\0" + secret_key.encode()).digest()

    def sign(self, task_id: str, run_id: int) -> str:
        mac = hmac.new(self._key, f"{task_id}/{run_id}".encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode()

    def matches(self, task_id: str, run_id: int, signature: str) -> bool:
        """Whether `signature` is this run's (compared in constant time)."""
        return hmac.compare_digest(self.sign(task_id, run_id).encode(), signature.encode())


def message_text(task_id: str, run_id: int, signature: str) -> str:
    """A message's `MessageText`: base64 of the JSON `{taskId, runId, signature}`."""
    body = orjson.dumps({"taskId": task_id, "runId": run_id, "signature": signature})
    return base64.b64encode(body).decode()


_MESSAGE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def new_message_id() -> str:
    """A random UUID, written as `str(uuid.uuid4())` writes it."""
    h = slugid.random_uuid_bytes().hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def could_be_message_id(value: str) -> bool:
    """Whether `value` has the shape of our message ids (a lowercase UUID): anything else names no
    message, and is not sent to the database (where a NUL in it is an error of its own)."""
    return _MESSAGE_ID.fullmatch(value) is not None


def new_pop_receipt() -> str:
    """An opaque receipt like Azure's: standard base64, so it holds `+`, `/` and `=` that a
    client must percent-encode in a delete URL (docs/poll.md, A worker's round)."""
    return base64.b64encode(secrets.token_bytes(18) + b"\x01").decode()


def check_pop_receipt(value: str | None) -> str:
    """A pop receipt as sent; 400 if it is missing or could not be one of ours."""
    if value is None or value == "":
        raise AzureError(
            400,
            "MissingRequiredQueryParameter",
            "A query parameter that's mandatory for this request is not specified.",
            QueryParameterName="popreceipt",
        )
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 19:
        raise invalid_query("popreceipt", value, "Invalid pop receipt format.")
    return value


# Query parameters -----------------------------------------------------------------------------


def whole_in_range(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter in [low, high]; Azure's 400s for text or a value out of range."""
    value = query.get(name)
    if value is None:
        return default
    number = digits.parse_whole(value.strip(), 12)
    if number is None:
        raise invalid_query(name, value, "The value is not a valid integer.")
    if not low <= number <= high:
        raise out_of_range(name, value, low, high)
    return number


# Shared access signatures ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sas:
    """The SAS fields of a request's query string."""

    version: str
    start: str
    expiry: str
    permissions: str
    signature: str
    ip: str = ""
    protocol: str = ""
    identifier: str = ""
    present: tuple[str, ...] = field(default=())


def _sas_time(ms: Millis) -> str:
    return dates.to_iso(ms)[:19] + "Z"


def _string_to_sign(queue: str, sas: Sas) -> str:
    resource = f"/queue/{ACCOUNT}/{queue}"
    fields = (sas.permissions, sas.start, sas.expiry, resource, sas.identifier, sas.ip, sas.protocol)
    return "\n".join((*fields, sas.version))


class SasSigner:
    """Signs and checks service SAS tokens for taskyard's queues, as Azure does with an account
    key (HMAC-SHA256 over its string-to-sign); the key is derived from the deployment's secret."""

    def __init__(self, secret_key: str) -> None:
        self._key = hashlib.sha256(b"taskyard-poll-sas\0" + secret_key.encode()).digest()

    def _sign(self, queue: str, sas: Sas) -> str:
        mac = hmac.new(self._key, _string_to_sign(queue, sas).encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode()

    def token(self, queue: str, start: Millis, expiry: Millis, permissions: str = GRANTED) -> dict[str, str]:
        """The SAS query parameters granting `permissions` on `queue` from `start` to `expiry`."""
        sas = Sas(SAS_VERSION, _sas_time(start), _sas_time(expiry), permissions, "")
        return {
            "sv": sas.version,
            "st": sas.start,
            "se": sas.expiry,
            "sp": permissions,
            "sig": self._sign(queue, sas),
        }

    def check(self, queue: str, query: Mapping[str, str], now: Millis, needed: str) -> None:
        """AzureError 403 unless the query's SAS is ours for `queue`, current, and grants one of
        the letters in `needed`."""
        sas = parse_sas(query)
        if not hmac.compare_digest(self._sign(queue, sas).encode(), sas.signature.encode()):
            raise authentication_failed("Signature did not match.")
        start = _parse_sas_time(sas.start, "st") if sas.start else None
        expiry = _parse_sas_time(sas.expiry, "se")
        if (start is not None and start > now) or expiry < now:
            raise authentication_failed(
                f"Signature not valid in the specified time frame: Start [{sas.start}] - "
                f"Expiry [{sas.expiry}] - Current [{_sas_time(now)}]"
            )
        if not any(letter in sas.permissions for letter in needed):
            raise permission_mismatch(
                f"The signature grants {sas.permissions!r}; this operation needs {needed!r}."
            )


def parse_sas(query: Mapping[str, str]) -> Sas:
    """The SAS fields of a query; 403 AuthenticationFailed when a mandatory one is missing."""
    for name in ("sig", "sv", "se", "sp"):
        if not query.get(name):
            raise authentication_failed(f"{name} is mandatory. Cannot be empty")
    if query.get("si"):
        raise authentication_failed("Stored access policies (si) are not supported here.")
    if any(len(query.get(k, "")) > MAX_QUERY_TEXT for k in ("sig", "sv", "se", "sp", "st", "sip", "spr")):
        raise authentication_failed("A signature field is too long.")
    if query["sv"] < SAS_VERSION:
        raise authentication_failed(f"The signed version {query['sv']!r} is older than {SAS_VERSION}.")
    permissions = query["sp"]
    if any(letter not in PERMISSION_ORDER for letter in permissions):
        raise authentication_failed(f"Invalid signed permissions {permissions!r}.")
    return Sas(
        query["sv"],
        query.get("st", ""),
        query["se"],
        permissions,
        query["sig"],
        ip=query.get("sip", ""),
        protocol=query.get("spr", ""),
    )


def _parse_sas_time(text: str, name: str) -> Millis:
    try:
        return dates.parse_iso(text)
    except ValueError:
        raise authentication_failed(f"{name} is not a valid date: {text[:40]!r}") from None


# XML ------------------------------------------------------------------------------------------


def http_date(ms: Millis) -> str:
    """RFC 1123, as Azure writes every time in its XML and headers."""
    return formatdate(ms / 1000, usegmt=True)


@dataclass(frozen=True)
class QueueMessage:
    """One message as Get Messages (with pop receipt and next visibility) or Peek shows it."""

    message_id: str
    inserted: Millis
    expires: Millis
    dequeue_count: int
    text: str
    pop_receipt: str | None = None
    visible: Millis | None = None


def messages_xml(messages: Sequence[QueueMessage]) -> bytes:
    """A `QueueMessagesList` body."""
    parts = ['<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>']
    for m in messages:
        parts.append("<QueueMessage>")
        parts.append(f"<MessageId>{escape(m.message_id)}</MessageId>")
        parts.append(f"<InsertionTime>{http_date(m.inserted)}</InsertionTime>")
        parts.append(f"<ExpirationTime>{http_date(m.expires)}</ExpirationTime>")
        if m.pop_receipt is not None and m.visible is not None:
            parts.append(f"<PopReceipt>{escape(m.pop_receipt)}</PopReceipt>")
            parts.append(f"<TimeNextVisible>{http_date(m.visible)}</TimeNextVisible>")
        parts.append(f"<DequeueCount>{m.dequeue_count}</DequeueCount>")
        parts.append(f"<MessageText>{escape(m.text)}</MessageText>")
        parts.append("</QueueMessage>")
    parts.append("</QueueMessagesList>")
    return "".join(parts).encode()


# What XML 1.0 cannot hold: every character but tab, newline, carriage return, U+0020-U+D7FF,
# U+E000-U+FFFD and U+10000 up. Spelled as that complement, not as `[^...]` of the allowed ranges,
# which compiles ten times slower (a bitmap of the whole Unicode range) for the same matches.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(value: str) -> str:
    """`value` escaped for XML, characters XML cannot hold (control characters) shown as `?`."""
    return escape(_NOT_XML.sub("?", value))


def error_xml(error: AzureError, request_id: str, now: Millis) -> bytes:
    """Azure's error body: code, message (with the request id and time), then detail elements."""
    message = f"{error.message}\nRequestId:{request_id}\nTime:{dates.to_iso(now)[:-1]}0000Z"
    details = "".join(f"<{k}>{_xml_text(v)}</{k}>" for k, v in error.details.items())
    body = f"<Error><Code>{error.code}</Code><Message>{_xml_text(message)}</Message>{details}</Error>"
    return ('<?xml version="1.0" encoding="utf-8"?>' + body).encode()
