"""The fuzzer's requests at the poll protocol's Azure-queue endpoint (`/api/queue/v1/_azure/...`).

Its credential is the SAS in the URL, so requests start from the signed URLs pollTaskUrls gave
for the fuzzer's own task queue (one queue per priority): Get and Peek Messages on a poll URL,
Delete and Update Message on a delete URL filled with a message the run received (its id and
latest pop receipt). Flaws tamper the SAS (`sv`, `st`, `se`, `sp`, `sig`), the operation's query
(`numofmessages`, `visibilitytimeout`, `peekonly`, `popreceipt`: out of range, text, stale), the
message (another queue's, unknown ones) and Update Message's XML body. Its errors are Azure's:
`azure_error()` checks an answer's body is `<Error><Code>..</Code><Message>..</Message></Error>`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from taskyard.model import azure_queue
from tests.api.fuzzing import HOST, Answer, Req

if TYPE_CHECKING:
    from tests.api.fuzz_targets import Builder

PREFIX = "/api/queue/v1/_azure"
KEPT = 8  # the newest messages (and stale receipts) the run keeps aiming at
SAS_NAMES = ["sv", "st", "se", "sp", "sig"]


@dataclass
class Message:
    """A message the run received: which poll queue (index into `Azure.queues`), id, receipt, text."""

    queue: int
    message_id: str
    receipt: str
    text: str


@dataclass
class Azure:
    """The signed URLs of the fuzzer's task queue, and the messages received on them so far."""

    queues: list[dict[str, str]]  # pollTaskUrls' entries: signedPollUrl, signedDeleteUrl
    messages: list[Message]
    foreign: list[Message]  # messages of another task queue's queues
    stale: list[str] = field(default_factory=list)  # receipts replaced since
    signer: azure_queue.SasSigner | None = None  # the deployment's: signs tampered SAS fields

    def names(self) -> list[str]:
        return [entry["signedPollUrl"].split("/_azure/")[1].split("/")[0] for entry in self.queues]


def azure_error(answer: Answer) -> bool:
    """Whether the body is Azure's error: `<Error><Code>..</Code><Message>..</Message>..</Error>`,
    its code also in `x-ms-error-code`."""
    if not answer.headers.get("content-type", "").startswith("application/xml"):
        return False
    try:
        root = ElementTree.fromstring(answer.body)
    except ElementTree.ParseError:
        return False
    code, message = root.findtext("Code"), root.findtext("Message")
    return (
        root.tag == "Error" and bool(code) and bool(message) and answer.headers.get("x-ms-error-code") == code
    )


def build(b: Builder, method: str, path_template: str) -> Req:  # noqa: C901 (one branch per flaw)
    """A request at one of the endpoint's routes: a signed call, with the builder's flaws."""
    az, v, rng = b.state.azure, b.v, b.rng
    queue = rng.randrange(len(az.queues))
    sub = path_template[len(PREFIX) :]
    body = b""
    if sub == "/{queue}/messages/{message_id}":
        url = _message_url(b, queue)
        if method == "PUT":
            url += "&visibilitytimeout=" + rng.choice(["0", "1", "30", "300"])
            body = _update_body(b)
    elif sub == "/{queue}/messages":
        url = az.queues[queue]["signedPollUrl"]
        if v.chance(0.3):
            url += "&numofmessages=" + str(rng.randint(1, 32))
        if v.chance(0.2):
            url += "&peekonly=true"
        if method == "POST":
            body = b"<QueueMessage><MessageText>eA==</MessageText></QueueMessage>"
    else:
        rest = "" if sub == "" else "/" + v.url_part(v.text())
        url = "http://" + HOST + PREFIX + rest + "?" + az.queues[queue]["signedPollUrl"].split("?")[1]
    path, pairs = _split(url)
    if "signature" in b.flaws:
        pairs = _tamper_sas(b, pairs)
        if az.signer is not None and b.v.chance(0.6):  # signed anew: the changed field is checked
            pairs = _resign(az.signer, path, pairs)
    if "query" in b.flaws:
        pairs = _bad_query(b, pairs)
    if "path" in b.flaws:
        path = _bad_path(b, path)
    if "reshape" in b.flaws:
        path = b._reshape(path)
    if "body" in b.flaws:
        body = _bad_body(b, body)
    headers: list[tuple[str, str | bytes]] = [("host", HOST)]
    if body or "content-type" in b.flaws:
        headers.append(("content-type", v.text() if "content-type" in b.flaws else "application/xml"))
    if "headers" in b.flaws:
        headers.append(("x-ms-version", rng.choice(["2019-07-07", "2009-09-19", "9999-99-99", v.text()])))
    if "encoding" in b.flaws:
        headers.append(("content-encoding", rng.choice(["gzip", "identity", v.text()])))
    query = "&".join(f"{n}={x}" for n, x in pairs)
    return b._envelope(method, path, query, headers, body)


def _split(url: str) -> tuple[str, list[tuple[str, str]]]:
    """A URL's path and its query pairs, values kept percent-encoded as signed."""
    path, _, query = url.partition("?")
    pairs = [(n, x) for n, _, x in (p.partition("=") for p in query.split("&") if p)]
    return path[len("http://" + HOST) :], pairs


def _message_url(b: Builder, queue: int) -> str:
    """A delete URL filled with a message: mostly one the run received, on its own queue and with
    its latest receipt; else on another queue (`queue`), another task queue's, or a stale receipt."""
    az, v, rng = b.state.azure, b.v, b.rng
    unknown = Message(queue, "00000000-0000-0000-0000-000000000000", "AAAA", "")
    if az.messages and v.chance(0.85):
        message = rng.choice(az.messages)
        queue = message.queue if v.chance(0.85) else queue
    else:
        message = rng.choice(az.foreign or [unknown])
    receipt = rng.choice(az.stale) if az.stale and v.chance(0.1) else message.receipt
    template = az.queues[queue]["signedDeleteUrl"]
    filled = template.replace("{{messageId}}", quote(message.message_id, safe=""))
    return filled.replace("{{popReceipt}}", quote(receipt, safe=""))


def _update_body(b: Builder) -> bytes:
    """Update Message's body: none, or the message's text again (another text is refused)."""
    az, v = b.state.azure, b.v
    if v.chance(0.5) or not az.messages:
        return b""
    text = b.rng.choice(az.messages).text
    return f"<QueueMessage><MessageText>{text}</MessageText></QueueMessage>".encode()


def _tamper_sas(b: Builder, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    v, rng = b.v, b.rng
    name = rng.choice(SAS_NAMES)
    if v.chance(0.2):
        return [(n, x) for n, x in pairs if n != name]
    values = {
        "sv": ["2009-09-19", "2019-07-08", "2099-01-01", ""],
        "st": ["2099-01-01T00:00:00Z", "9999-99-99T", "0000-01-01T00:00:00Z", ""],
        "se": ["2000-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "x", "9" * 40],
        "sp": ["raup", "r", "a", "x", "", "rp" * 200],
        "sig": ["AAAA", quote("y" * 43 + "=", safe=""), "%FF", "=" * 300],
    }
    value = rng.choice(values[name]) if v.chance(0.7) else v.url_part(v.text())
    return [(n, value if n == name else x) for n, x in pairs]


def _resign(signer: azure_queue.SasSigner, path: str, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`pairs` with `sig` made by the deployment's key over the SAS fields as they now are."""
    fields = {n: unquote(x) for n, x in pairs}
    name = unquote(path).split("/_azure/")[-1].split("/")[0]
    sas = azure_queue.Sas(
        fields.get("sv", ""),
        fields.get("st", ""),
        fields.get("se", ""),
        fields.get("sp", ""),
        "",
        ip=fields.get("sip", ""),
        protocol=fields.get("spr", ""),
    )
    sig = quote(signer._sign(name, sas), safe="")
    return [(n, sig if n == "sig" else x) for n, x in pairs]


def _bad_query(b: Builder, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    v, rng = b.v, b.rng
    name = rng.choice(
        ["numofmessages", "visibilitytimeout", "peekonly", "popreceipt", "messagettl", "timeout"]
    )
    value = v.pick(
        [
            (
                3,
                lambda: rng.choice(
                    ["0", "33", "-1", "text", "1.5", "604801", "99999999999999", "%C2%B2", ""]
                ),
            ),
            (1, lambda: v.url_part(v.number_text())),
            (1, lambda: v.url_part(v.text())),
            (1, lambda: quote(rng.choice(b.state.azure.stale or ["AAAA"]), safe="")),
        ]
    )
    kept = [(n, x) for n, x in pairs if n != name or v.chance(0.3)]  # sometimes the name twice
    return [*kept, (name, value)]


def _bad_path(b: Builder, path: str) -> str:
    v, rng, az = b.v, b.rng, b.state.azure
    parts = path.split("/")  # ['', 'api', 'queue', 'v1', '_azure', queue, 'messages', id?]
    if len(parts) < 7:
        return path + "/" + v.url_part(v.text())
    if len(parts) > 7 and v.chance(0.6):
        foreign = az.foreign + az.messages
        parts[7] = quote(rng.choice(foreign).message_id, safe="") if foreign else ""
        parts[7] = parts[7] if v.chance(0.5) else v.url_part(v.text())
    else:
        names = az.names()
        parts[5] = rng.choice([*names, "Bad--Name", "q", "a" * 64, v.url_part(v.text()), parts[5].upper()])
    return "/".join(parts)


def _bad_body(b: Builder, body: bytes) -> bytes:
    v, rng = b.v, b.rng
    return v.pick(
        [
            (
                3,
                lambda: rng.choice(
                    [
                        b"<QueueMessage>",
                        b"<QueueMessage/>",
                        b"<QueueMessage><MessageText/></QueueMessage>",
                        b"<Other><MessageText>eA==</MessageText></Other>",
                        b"<QueueMessage><MessageText>not base64!</MessageText></QueueMessage>",
                        b'<?xml version="1.0" encoding="utf-16"?><QueueMessage/>',
                        b"<!DOCTYPE x [<!ENTITY a 'b'>]><QueueMessage><MessageText>&a;</MessageText>"
                        b"</QueueMessage>",
                        b'<!DOCTYPE x [<!ENTITY a SYSTEM "file:///etc/passwd">]><QueueMessage>&a;</QueueMessage>',
                        b"<a>" * 5000 + b"</a>" * 5000,
                        b'{"MessageText": "x"}',
                        b"\xff\xfe<\x00",
                    ]
                ),
            ),
            (1, lambda: body[: rng.randint(0, max(0, len(body) - 1))]),
            (1, lambda: v.raw_bytes(200)),
            (
                1,
                lambda: (
                    b"<QueueMessage><MessageText>"
                    + b"A" * rng.choice([65536, 100_000])
                    + b"</MessageText></QueueMessage>"
                ),
            ),
            (1, lambda: v.encode(v.value())),
        ]
    )


def learn(az: Azure, req: Req, answer: Answer) -> None:
    """Keep the messages a Get Messages handed out, and an Update Message's new receipt."""
    if answer.status == 200 and req.method == "GET" and req.path.endswith("/messages"):
        names = az.names()
        name = unquote(req.path).split("/")[-2]
        if name not in names:
            return
        for node in ElementTree.fromstring(answer.body):
            receipt = node.findtext("PopReceipt")
            if receipt is not None:
                az.messages.append(
                    Message(
                        names.index(name),
                        node.findtext("MessageId") or "",
                        receipt,
                        node.findtext("MessageText") or "",
                    )
                )
        del az.messages[:-KEPT]
    elif answer.status == 204 and req.method == "DELETE":
        message_id = unquote(req.path.rsplit("/", 1)[1])
        az.messages[:] = [m for m in az.messages if m.message_id != message_id]
    elif answer.status == 204 and req.method == "PUT" and "x-ms-popreceipt" in answer.headers:
        message_id = unquote(req.path.rsplit("/", 1)[1])
        for m in az.messages:
            if m.message_id == message_id:
                az.stale.append(m.receipt)
                m.receipt = answer.headers["x-ms-popreceipt"]
        del az.stale[:-KEPT]
