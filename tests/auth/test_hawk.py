"""Hawk verification against what the real clients send: mohawk and the taskcluster Python client.

The known-good vectors below were computed with TaskCluster's Python client and mohawk, and accepted
by TaskCluster's own server-side validator.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import time
import types
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import mohawk
import mohawk.base
import mohawk.bewit
import pytest
import requests
import taskcluster
import taskcluster.client
from taskcluster import utils as tc_utils

from taskyard.auth import hawk
from taskyard.model.errors import AuthenticationFailed

T0 = 1704067200  # 2024-01-01T00:00:00Z
NOW = T0 * 1000
MINUTE = 60_000
ROOT_URL = "https://tc.example.com"
TASK_ID = "fKz7yXv3Q0m2p9Wq1bC4dA"
TASK_URL = f"{ROOT_URL}/api/queue/v1/task/{TASK_ID}"
EMPTY_HASH = "B0weSUXsMcb5UhL41FZbrUJCAotzSI3HawE1NPLRUz8="

CLIENTS = {
    c.client_id: c
    for c in [
        hawk.ClientSecret("root", "root-secret", ("*",), None, False),
        hawk.ClientSecret("worker", "wsecret", ("queue:claim-work:proj/worker",), None, False),
        hawk.ClientSecret("tester", "no-secret", ("test:*", "auth:create-client:test:*"), None, False),
        hawk.ClientSecret(
            "issuer-client",
            "issuer-secret-token-0123456789",
            ("queue:get-artifact:private/*", "assume:project:*"),
            None,
            False,
        ),
        hawk.ClientSecret("static/taskcluster/queue", "queue-secret-0123456789abcdef", ("*",), None, False),
        hawk.ClientSecret("limited", "limited-secret", ("queue:get-task:*",), NOW + 10 * MINUTE, False),
        hawk.ClientSecret("role-user", "role-secret", ("assume:role-x",), None, False),
        hawk.ClientSecret("gone", "gone-secret", ("*",), NOW - 1, False),
        hawk.ClientSecret("off", "off-secret", ("*",), None, True),
    ]
}
SECRETS = [c.access_token for c in CLIENTS.values()]


async def lookup(client_id: str) -> hawk.ClientSecret | None:
    return CLIENTS.get(client_id)


# ---------------------------------------------------------------------------------------------------
# Helpers: build requests as they arrive on the wire, sign them as the clients do.


def request_for(
    url: str,
    authorization: str | None = None,
    *,
    method: str = "GET",
    body: bytes = b"",
    content_type: str = "",
) -> hawk.Request:
    parts = urlsplit(url)
    resource = requests.Request(method, url).prepare().path_url  # the target requests puts on the wire
    host, port = hawk.host_port(parts.netloc, parts.scheme, None, None)
    return hawk.Request(method, resource, host, port, authorization, body, content_type)


def sign(
    url: str,
    client_id: str,
    key: str,
    *,
    method: str = "GET",
    ext: str | None = "e30=",
    ts: int | str = T0,
    content: str = "",
    content_type: str = "",
) -> str:
    sender = mohawk.Sender(
        {"id": client_id, "key": key, "algorithm": "sha256"},
        url,
        method,
        content=content,
        content_type=content_type,
        ext=ext,
        _timestamp=ts,
        nonce="AbC123",
    )
    return str(sender.request_header)


def ext_of(obj: object) -> str:
    """ext as the Python client encodes it: compact JSON, URL-safe base64 with padding."""
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode()


def signed(client_id: str, key: str, ext: object = None, url: str = TASK_URL, **kw: Any) -> hawk.Request:
    header = sign(url, client_id, key, ext=ext_of(ext) if ext is not None else "e30=", **kw)
    return request_for(url, header, method=kw.get("method", "GET"))


async def check(req: hawk.Request, now_ms: int = NOW, **kw: Any) -> hawk.Authenticated | None:
    return await hawk.authenticate(req, lookup, now_ms=now_ms, **kw)


async def accepted(req: hawk.Request, now_ms: int = NOW, **kw: Any) -> hawk.Authenticated:
    result = await check(req, now_ms, **kw)
    assert result is not None
    return result


async def refused(req: hawk.Request, now_ms: int = NOW, **kw: Any) -> str:
    with pytest.raises(AuthenticationFailed) as info:
        await check(req, now_ms, **kw)
    message = info.value.message
    assert not any(secret in message for secret in SECRETS), message
    return message


def temp_cert(
    signer: str = "tester",
    signed_scopes: Sequence[str] = ("test:scope-1",),
    *,
    start: int = NOW - MINUTE,
    expiry: int = NOW + 60 * MINUTE,
    name: str | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """A certificate signed by `signer`, then altered by `changes` (not re-signed)."""
    token = CLIENTS[signer].access_token
    cert = hawk.create_certificate(
        signer, token, signed_scopes, start_ms=start, expiry_ms=expiry, seed="S" * 44, client_id=name
    )
    return {**cert, **changes}


def temp_request(cert: object, client_id: str = "tester", **ext: Any) -> hawk.Request:
    """A request signed with the temporary key a certificate of `tester`'s would give."""
    token = hawk.derive_access_token("no-secret", "S" * 44)
    return signed(client_id, token, {"certificate": cert, **ext})


# ---------------------------------------------------------------------------------------------------
# Known-good vectors: Hawk headers and bewits from mohawk / the Python client.


async def test_reference_get_header() -> None:
    header = sign(TASK_URL, "root", "root-secret")
    assert 'mac="Yc7VNeoM2G2QR1E5KDsZduSwdAwVPTQbUw314749+68="' in header
    assert f'hash="{EMPTY_HASH}"' in header
    got = await accepted(request_for(TASK_URL, header))
    assert got == hawk.Authenticated("root", ("*",), None, False, None)


async def test_reference_post_with_authorized_scopes() -> None:
    url, body = f"{ROOT_URL}/api/auth/v1/scopes/expand", '{"scopes":["assume:anonymous"]}'
    ext = "eyJhdXRob3JpemVkU2NvcGVzIjpbImF1dGg6ZXhwYW5kLXNjb3BlcyJdfQ=="
    assert ext == ext_of({"authorizedScopes": ["auth:expand-scopes"]})
    header = sign(
        url, "root", "root-secret", method="POST", ext=ext, content=body, content_type="application/json"
    )
    assert 'hash="BZBzN/Hv/AkJ1xP2Ln2T9vxoGOg33usKwWI6vC7uugs="' in header
    assert 'mac="EvLrN7lBN811Kzx8WTQVA70Sx2+4mV0kkQtOLE8LVj0="' in header
    req = request_for(url, header, method="POST", body=body.encode(), content_type="application/json")
    for host in ("tc.example.com", "TC.example.com"):
        got = await accepted(hawk.Request(**{**req.__dict__, "host": host}))
        assert got.authorized_scopes == ("auth:expand-scopes",)
        assert got.unexpanded_scopes == ("auth:expand-scopes",)


async def test_reference_claim_work_and_timestamp_window() -> None:
    url = "http://127.0.0.1:8080/api/queue/v1/claim-work/proj%2Fworker?limit=3"
    header = sign(url, "worker", "wsecret")
    assert 'mac="fTe+sWjJ+I5memGavnPdCb/w5s6Wf7UHHyTPeAJESZw="' in header
    req = request_for(url, header)
    assert (req.resource, req.host, req.port) == (
        "/api/queue/v1/claim-work/proj%2Fworker?limit=3",
        "127.0.0.1",
        8080,
    )
    assert (await accepted(req, NOW + 900_000)).client_id == "worker"
    assert (await accepted(req, NOW - 900_000)).client_id == "worker"
    assert await refused(req, NOW + 901_000) == "Unauthorized: Stale timestamp"
    assert await refused(req, NOW - 901_000) == "Unauthorized: Stale timestamp"


def _freeze_client_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    monkeypatch.setattr(
        taskcluster.client, "time", types.SimpleNamespace(time=lambda: seconds, sleep=time.sleep)
    )


def _bewit_of(url: str) -> str:
    value = url.split("bewit=")[1].split("&")[0]
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()


async def test_reference_signed_url(monkeypatch: pytest.MonkeyPatch) -> None:
    _freeze_client_clock(monkeypatch, T0)
    creds = {"clientId": "root", "accessToken": "root-secret"}
    queue = taskcluster.Queue({"rootUrl": ROOT_URL, "credentials": creds})
    url = queue.buildSignedUrl("getLatestArtifact", TASK_ID, "private/build/target.tar.gz")
    assert urlsplit(url).path == f"/api/queue/v1/task/{TASK_ID}/artifacts/private%2Fbuild%2Ftarget.tar.gz"
    assert _bewit_of(url) == "root\\1704068100\\aO4vwflHdgdPs9YGAX5phc3VicmlwJixi+2Z3nZ5vKc=\\e30="
    got = await accepted(request_for(url), 1704068099_999)
    assert got == hawk.Authenticated("root", ("*",), None, True, None)
    assert await refused(request_for(url), 1704068100_000) == "Unauthorized: Access expired"


async def test_reference_signed_url_with_authorized_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    _freeze_client_clock(monkeypatch, T0)
    options = {"rootUrl": ROOT_URL, "credentials": {"clientId": "tester", "accessToken": "no-secret"}}
    auth = taskcluster.Auth({**options, "authorizedScopes": ["test:authenticate-get"]})
    url = auth.buildSignedUrl("testAuthenticateGet")
    assert urlsplit(url).path == "/api/auth/v1/test-authenticate-get/"
    assert _bewit_of(url) == (
        "tester\\1704068100\\6ijJqyhEN/QuqMYSc0/HgpbSMrbV5yxFh6T8PZlDKQw=\\"
        "eyJhdXRob3JpemVkU2NvcGVzIjpbInRlc3Q6YXV0aGVudGljYXRlLWdldCJdfQ=="
    )
    got = await accepted(request_for(url))
    assert got.authorized_scopes == ("test:authenticate-get",)
    assert got.via_bewit


# ---------------------------------------------------------------------------------------------------
# Known-good vectors: temporary credentials from the real Python client.

TEMP_VECTORS = [
    pytest.param(
        "issuer-client",
        None,
        (T0, T0 + 3600),
        ["queue:get-artifact:private/*", "assume:project:foo"],
        "AAAAAAAAQAGAAAAAAAAAAABBBBBBBBQBGBBBBBBBBBBB",
        ("BVP07sBv4AFxZ8+YOuwFyM6J+AJ4hhFD/pRrWvEkRQU=", "kRFmmKbatZ31xCETFbuORmD07S827YrUIIgjA03ZSlM"),
        id="unnamed",
    ),
    pytest.param(
        "static/taskcluster/queue",
        f"task-client/{TASK_ID}/0/on/wg-1/worker-1/until/1704068400",
        (T0, T0 + 1200),
        [
            f"queue:reclaim-task:{TASK_ID}/0",
            f"queue:resolve-task:{TASK_ID}/0",
            f"queue:create-artifact:{TASK_ID}/0",
            "secrets:get:project/foo",
        ],
        f"{TASK_ID}Zm9vYmFyYmF6cXV4MTIzNA",
        ("wJnAntiK36L89Ox/Q0fulkkq5AwOEnf+NKABXWO2zuQ=", "vdi90NSIWMXyANhR8P8J_5bP8rw-0s-jQnKjrjP7X7U"),
        id="named-task-client",
    ),
    pytest.param(
        "tester",
        None,
        (1591012800, 1591099200),
        [],
        "c2VlZHNlZWRzZWVkc2VlZAbW9yZXNlZWRtb3Jlc2VlZA",
        ("eTZ3yLOIf6+Ihl8gCNBMNBxd3cxAXXHvS1a8OZQAS00=", "_wI14DJR_Sq7f5qZ65x738rriRE_s3qKZv_5NHa29ng"),
        id="unnamed-no-scopes",
    ),
    pytest.param(
        "tester",
        "test:my-temp-cred",
        (1591012800, 1593691200),  # exactly 31 days
        ["test:scope-1"],
        "c2VlZHNlZWRzZWVkc2VlZAbW9yZXNlZWRtb3Jlc2VlZA",
        ("khisUVHtB9KTcIVvfsSybiZnjmyHm3Q96IG0flNi6oc=", "_wI14DJR_Sq7f5qZ65x738rriRE_s3qKZv_5NHa29ng"),
        id="named-31-days",
    ),
]


def _client_temporary_credentials(
    monkeypatch: pytest.MonkeyPatch,
    issuer: str,
    name: str | None,
    span: tuple[int, int],
    scopes: list[str],
    seed: str,
) -> dict[str, Any]:
    halves = iter([seed[:22], seed[22:]])
    monkeypatch.setattr(tc_utils, "slugId", lambda: next(halves))
    start, expiry = (dt.datetime.fromtimestamp(s, dt.UTC) for s in span)
    made = taskcluster.createTemporaryCredentials(
        issuer, CLIENTS[issuer].access_token, start, expiry, scopes, name=name
    )
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in made.items()}


@pytest.mark.parametrize(("issuer", "name", "span", "scopes", "seed", "expected"), TEMP_VECTORS)
async def test_reference_temporary_credentials(
    monkeypatch: pytest.MonkeyPatch,
    issuer: str,
    name: str | None,
    span: tuple[int, int],
    scopes: list[str],
    seed: str,
    expected: tuple[str, str],
) -> None:
    theirs = _client_temporary_credentials(monkeypatch, issuer, name, span, scopes, seed)
    assert (json.loads(theirs["certificate"])["signature"], theirs["accessToken"]) == expected
    ours = hawk.temporary_credentials(
        issuer,
        CLIENTS[issuer].access_token,
        scopes,
        start_ms=span[0] * 1000,
        expiry_ms=span[1] * 1000,
        client_id=name,
        seed=seed,
    )
    assert ours == theirs  # byte for byte, certificate string included
    options = {"rootUrl": ROOT_URL, "credentials": theirs}
    ext = taskcluster.Queue(options).makeHawkExt().decode()  # exactly what the client sends
    header = sign(TASK_URL, theirs["clientId"], theirs["accessToken"], ext=ext, ts=span[0] + 60)
    got = await accepted(request_for(TASK_URL, header), span[0] * 1000 + 60_000)
    assert got == hawk.Authenticated(name or issuer, tuple(scopes), None, False, span[1] * 1000)


# ---------------------------------------------------------------------------------------------------
# The real taskcluster client, captured on the wire.


class _Ok:
    status_code = 200

    def raise_for_status(self) -> None:
        pass

    def json(self) -> object:
        return {}


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> list[hawk.Request]:
    sent: list[hawk.Request] = []

    def send(method: str, url: str, payload: Any, headers: dict[str, str], session: object = None) -> _Ok:
        body = payload.encode() if isinstance(payload, str) else payload or b""
        auth, ctype = headers.get("Authorization"), headers.get("Content-Type", "")
        sent.append(request_for(url, auth, method=method.upper(), body=body, content_type=ctype))
        return _Ok()

    monkeypatch.setattr(tc_utils, "makeSingleHttpRequest", send)
    return sent


def _now_ms() -> int:
    return int(time.time() * 1000)


def _client(cls: Callable[..., Any], credentials: dict[str, Any], **options: Any) -> Any:
    return cls({"rootUrl": ROOT_URL, "credentials": credentials, "maxRetries": 0, **options})


async def test_client_get_and_post(wire: list[hawk.Request]) -> None:
    creds = {"clientId": "root", "accessToken": "root-secret"}
    _client(taskcluster.Queue, creds).task(TASK_ID)
    _client(taskcluster.Auth, creds, authorizedScopes=["auth:expand-scopes"]).expandScopes({"scopes": ["a"]})
    get, post = wire
    assert (get.method, get.resource) == ("GET", f"/api/queue/v1/task/{TASK_ID}")
    assert (post.method, post.content_type, post.body) == ("POST", "application/json", b'{"scopes":["a"]}')
    assert await accepted(get, _now_ms()) == hawk.Authenticated("root", ("*",), None, False)
    assert (await accepted(post, _now_ms())).authorized_scopes == ("auth:expand-scopes",)
    tampered = hawk.Request(**{**post.__dict__, "body": b'{"scopes":["*"]}'})
    assert (await refused(tampered, _now_ms())).startswith("Invalid payload hash: ")


async def test_client_with_temporary_credentials(wire: list[hawk.Request]) -> None:
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    expiry = start + dt.timedelta(hours=1)
    unnamed = taskcluster.createTemporaryCredentials("tester", "no-secret", start, expiry, ["test:a"])
    named = taskcluster.createTemporaryCredentials(
        "tester", "no-secret", start, expiry, ["test:b", "test:c"], name="test:mine"
    )
    _client(taskcluster.Auth, unnamed).testAuthenticateGet()
    _client(taskcluster.Auth, named, authorizedScopes=["test:b"]).testAuthenticateGet()
    first, second = [await accepted(r, _now_ms()) for r in wire]
    assert (first.client_id, first.scopes, first.authorized_scopes) == ("tester", ("test:a",), None)
    assert (second.client_id, second.scopes, second.authorized_scopes) == (
        "test:mine",
        ("test:b", "test:c"),
        ("test:b",),
    )
    assert second.expires_ms == int(expiry.timestamp()) * 1000


async def test_client_with_wrong_secret(wire: list[hawk.Request]) -> None:
    _client(taskcluster.Queue, {"clientId": "root", "accessToken": "not-the-secret"}).task(TASK_ID)
    assert await refused(wire[0], _now_ms()) == "Unauthorized: Bad mac"


# ---------------------------------------------------------------------------------------------------
# No credentials, two schemes, host and port.


async def test_no_credentials_is_none() -> None:
    assert await check(request_for(TASK_URL)) is None
    assert await check(request_for(TASK_URL, "")) is None  # an empty header is no header
    assert await check(request_for(f"{TASK_URL}?notbewit=1")) is None


async def test_header_and_bewit_together() -> None:
    req = request_for(f"{TASK_URL}?bewit=abc", sign(TASK_URL, "root", "root-secret"))
    assert (await refused(req)).startswith("Cannot use two authentication schemes at once")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tc.example.com", "https", None, None), ("tc.example.com", 443)),
        (("TC.Example.com:8080", "http", None, None), ("tc.example.com", 8080)),
        (("localhost", "http", None, None), ("localhost", 80)),
        (("localhost", "http", "443", None), ("localhost", 443)),
        (("localhost:8080", "http", None, "https"), ("localhost", 443)),
        (("localhost:8080", "http", None, "http"), ("localhost", 8080)),
        (("localhost", "https", "80", "https"), ("localhost", 80)),  # the port header wins
        (("localhost:8080", "http", "not-a-port", None), ("localhost", 8080)),
        (("[::1]:8080", "http", None, None), ("[::1]", 8080)),
        ((None, "https", None, None), ("", 443)),
    ],
)
def test_host_port(args: tuple[Any, ...], expected: tuple[str, int]) -> None:
    assert hawk.host_port(*args) == expected


async def test_port_and_host_are_signed() -> None:
    req = signed("root", "root-secret")
    assert await refused(hawk.Request(**{**req.__dict__, "port": 8443})) == "Unauthorized: Bad mac"
    assert (
        await refused(hawk.Request(**{**req.__dict__, "host": "evil.example.com"})) == "Unauthorized: Bad mac"
    )
    assert await refused(hawk.Request(**{**req.__dict__, "method": "DELETE"})) == "Unauthorized: Bad mac"


# ---------------------------------------------------------------------------------------------------
# The Authorization header: parsing, MAC, timestamp, payload hash.

GOOD_ATTRS = 'id="root", ts="1704067200", nonce="n", mac="m"'


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ('Hawk id="' + "a" * 4096 + '"', "Bad Request: Header length too long"),
        ("Basic cm9vdDpzZWNyZXQ=", "Unauthorized: Unauthorized"),
        ("Hawk", "Bad Request: Invalid header syntax"),
        ("Hawk: id", "Bad Request: Invalid header syntax"),
        (f"Hawk {GOOD_ATTRS} junk", "Bad Request: Bad header format"),
        (f'Hawk {GOOD_ATTRS}, foo="1"', "Bad Request: Unknown attribute: foo"),
        ('Hawk foo="1", bar="2"', "Bad Request: Unknown attribute: bar"),  # the last error wins
        (f'Hawk {GOOD_ATTRS}, ext="caf\u00e9"', "Bad Request: Bad attribute value: ext"),
        (f'Hawk {GOOD_ATTRS}, ext=""', "Bad Request: Bad attribute value: ext"),
        (f'Hawk {GOOD_ATTRS}, id="again"', "Bad Request: Duplicate attribute: id"),
        ('Hawk id="root", ts="1704067200", nonce="n"', "Bad Request: Missing attributes"),
        ('Hawk ts="1704067200", nonce="n", mac="m"', "Bad Request: Missing attributes"),
    ],
)
async def test_malformed_header(header: str, message: str) -> None:
    assert await refused(request_for(TASK_URL, header)) == message


def test_attributes_are_read_as_the_full_check_reads_them() -> None:
    """The well-formed header's shortcut answers what the attribute-by-attribute check answers,
    for headers built from the pieces that trip it (names known and not, repeats, separators,
    quotes, backslashes, empty and non-ASCII values)."""
    rng = random.Random(11)
    names = [*hawk.ATTRIBUTES, "foo", "Id", "i d"]
    values = ["1", "a b", "x=y", "", "caf\u00e9", "a\\b", 'a"b', "~!#$%&'()*+,-./:;<=>?@[]^`{|}"]
    separators = [", ", ",", " , ", "", " ", ",,", "\t,\n", ", junk "]
    shortcuts = 0
    for _ in range(20_000):
        count = rng.randint(1, 6)
        text = "".join(
            f'{rng.choice(names)}="{rng.choice(values)}"' + (rng.choice(separators) if i < count - 1 else "")
            for i in range(count)
        ) + rng.choice(["", " ", ",", "x"])
        try:
            expected: object = hawk._check_attributes(text)
        except AuthenticationFailed as refused:
            expected = str(refused)
        try:
            got: object = hawk._parse_attributes(text)
        except AuthenticationFailed as refused:
            got = str(refused)
        assert got == expected, text
        shortcuts += hawk._WELL_FORMED_RE.fullmatch(text) is not None and isinstance(got, dict)
    assert shortcuts > 1_000  # the shortcut was taken, and agreed


async def test_scheme_is_case_insensitive() -> None:
    header = sign(TASK_URL, "root", "root-secret").replace("Hawk ", "hAWK ", 1)
    assert (await accepted(request_for(TASK_URL, header))).client_id == "root"


async def test_bad_mac_comes_before_stale_timestamp() -> None:
    req = signed("root", "wrong-secret")
    assert await refused(req, NOW + 3600_000) == "Unauthorized: Bad mac"
    assert await refused(signed("root", "root-secret", ts="soon")) == "Unauthorized: Stale timestamp"


async def test_payload_hash() -> None:
    url, body = f"{ROOT_URL}/api/auth/v1/scopes/expand", '{"scopes":[]}'
    header = sign(url, "root", "root-secret", method="POST", content=body, content_type="application/json")
    ok = request_for(
        url, header, method="POST", body=body.encode(), content_type="Application/JSON; charset=utf-8"
    )
    assert (await accepted(ok)).client_id == "root"
    message = await refused(hawk.Request(**{**ok.__dict__, "body": b'{"scopes":["*"]}'}))
    assert message.startswith("Invalid payload hash: ")
    assert "Computed payload hash: " in message


async def test_no_hash_attribute_means_no_body_check() -> None:
    sender = mohawk.Sender(
        {"id": "root", "key": "root-secret", "algorithm": "sha256"},
        TASK_URL,
        "POST",
        always_hash_content=False,
        _timestamp=T0,
    )
    req = request_for(
        TASK_URL, sender.request_header, method="POST", body=b"anything", content_type="text/plain"
    )
    assert (await accepted(req)).client_id == "root"


async def test_only_json_bodies_are_hashed() -> None:
    # As in TaskCluster: a non-JSON body is not read, so it hashes as empty.
    header = sign(TASK_URL, "root", "root-secret", method="PUT", content="hello", content_type="text/plain")
    req = request_for(TASK_URL, header, method="PUT", body=b"hello", content_type="text/plain")
    assert (await refused(req)).startswith("Invalid payload hash: ")
    header = sign(TASK_URL, "root", "root-secret", method="PUT", content="", content_type="text/plain")
    req = request_for(TASK_URL, header, method="PUT", body=b"hello", content_type="text/plain")
    assert (await accepted(req)).client_id == "root"


# ---------------------------------------------------------------------------------------------------
# Clients.


@pytest.mark.parametrize(
    ("client_id", "message"),
    [
        ("nobody", "Client with clientId 'nobody' not found"),
        ("off", "Client with clientId 'off' is disabled"),
        ("gone", "Client with clientId: 'gone' has expired"),
    ],
)
async def test_client_refused(client_id: str, message: str) -> None:
    assert await refused(signed(client_id, "whatever")) == message


async def test_client_expiry_is_reported() -> None:
    got = await accepted(signed("limited", "limited-secret"))
    assert got.expires_ms == NOW + 10 * MINUTE


# ---------------------------------------------------------------------------------------------------
# ext and authorizedScopes.


@pytest.mark.parametrize(
    "ext",
    [
        "!!!!",
        base64.b64encode(b"not json").decode(),
        base64.b64encode(b'{"a":NaN}').decode(),
        base64.b64encode(b"\xff\xfe").decode(),
    ],
)
async def test_unparseable_ext(ext: str) -> None:
    req = request_for(TASK_URL, sign(TASK_URL, "root", "wrong-secret", ext=ext))
    assert await refused(req) == "Failed to parse ext"  # ext errors win over a bad MAC


@pytest.mark.parametrize("ext", ["e30", "WzEsMl0=", "bnVsbA==", "eyJ1bmtub3duIjp0cnVlfQ"])
async def test_ext_without_fields(ext: str) -> None:
    # {} unpadded, [1,2], null, {"unknown":true}: no restrictions
    req = request_for(TASK_URL, sign(TASK_URL, "root", "root-secret", ext=ext))
    assert await accepted(req) == hawk.Authenticated("root", ("*",), None, False)


async def test_authorized_scopes() -> None:
    got = await accepted(signed("limited", "limited-secret", {"authorizedScopes": []}))
    assert (got.scopes, got.authorized_scopes, got.unexpanded_scopes) == (("queue:get-task:*",), (), ())
    got = await accepted(signed("limited", "limited-secret", {"authorizedScopes": ["assume:anonymous"]}))
    assert got.authorized_scopes == ("assume:anonymous",)
    got = await accepted(signed("limited", "limited-secret", {"authorizedScopes": None}))
    assert got.authorized_scopes is None


@pytest.mark.parametrize(
    ("authorized", "message"),
    [
        ("queue:get-task:x", "ext.authorizedScopes must be an array"),
        ({"a": 1}, "ext.authorizedScopes must be an array"),
        (["ok", 5], "ext.authorizedScopes must be an array of valid scopes"),
        (["tab\there"], "ext.authorizedScopes must be an array of valid scopes"),
    ],
)
async def test_authorized_scopes_malformed(authorized: object, message: str) -> None:
    assert await refused(signed("limited", "limited-secret", {"authorizedScopes": authorized})) == message


async def test_authorized_scopes_not_satisfied() -> None:
    message = await refused(
        signed("limited", "limited-secret", {"authorizedScopes": ["queue:create-task:x"]})
    )
    assert message == (
        "Supplied credentials do not satisfy authorizedScopes; credentials have scopes:\n\n"
        "```\nqueue:get-task:*\nassume:anonymous\n```\n\n"
        "authorizedScopes are:\n\n```\nqueue:create-task:x\n```"
    )


# ---------------------------------------------------------------------------------------------------
# Certificates: every check, in TaskCluster's order.


async def test_certificate_object_and_string_accepted() -> None:
    cert = temp_cert()
    for form in (cert, json.dumps(cert)):
        got = await accepted(temp_request(form))
        assert (got.client_id, got.scopes, got.expires_ms) == ("tester", ("test:scope-1",), NOW + 60 * MINUTE)


@pytest.mark.parametrize(
    ("cert", "message"),
    [
        (5, "ext.certificate must be a JSON object"),
        ("{not json", "ext.certificate must be a JSON object"),
        ('["a"]', "ext.certificate must be a JSON object"),
        (True, "ext.certificate must be a JSON object"),
        ([1], "ext.certificate.version must be 1"),
        ({}, "ext.certificate.version must be 1"),
        (temp_cert(version=2), "ext.certificate.version must be 1"),
        (temp_cert(version=True), "ext.certificate.version must be 1"),
        (temp_cert(version=2, seed=5), "ext.certificate.version must be 1"),
        (temp_cert(seed=5), "ext.certificate.seed must be a string"),
        (temp_cert(seed="S" * 43), "ext.certificate.seed must be 44 characters"),
        ({**temp_cert(), "start": "1"}, "ext.certificate.start must be a number"),
        ({**temp_cert(), "expiry": None}, "ext.certificate.expiry must be a number"),
        (temp_cert(scopes="test:scope-1"), "ext.certificate.scopes must be an array"),
        (temp_cert(scopes=["ok", "bad\n"]), "ext.certificate.scopes must be an array of valid scopes"),
        (temp_cert(start=NOW + 5 * MINUTE + 1), "ext.certificate.start > now"),
        (temp_cert(expiry=NOW - 5 * MINUTE - 1, signature="x"), "ext.certificate.expiry < now"),
        (
            temp_cert(start=NOW - 10 * MINUTE, expiry=NOW - 10 * MINUTE + 31 * 1440 * MINUTE + 1),
            "ext.certificate cannot last longer than 31 days!",
        ),
        (
            temp_cert(clientId="test:x"),
            "ext.certificate.clientId must only be used with ext.certificate.issuer",
        ),
        (
            temp_cert(scopes=["queue:create-task:x", "test:y"]),
            "ext.certificate issuer `tester` doesn't satisfy all certificate scopes queue:create-task:x, "
            "test:y.  The temporary credentials were not generated correctly.",
        ),
        (
            temp_cert(signature="BVP07sBv4AFxZ8+YOuwFyM6J+AJ4hhFD/pRrWvEkRQU="),
            "ext.certificate.signature is not valid",
        ),
        (temp_cert(signature=None), "ext.certificate.signature is not valid"),
        (temp_cert(scopes=["test:other"]), "ext.certificate.signature is not valid"),  # scopes are signed
    ],
)
async def test_certificate_refused(cert: object, message: str) -> None:
    assert await refused(temp_request(cert)) == message


@pytest.mark.parametrize(
    ("start", "expiry"),
    [
        (NOW + 5 * MINUTE, NOW + 60 * MINUTE),  # starts within the tolerance
        (NOW - 60 * MINUTE, NOW - 5 * MINUTE),  # expired within the tolerance
        (NOW - MINUTE, NOW - MINUTE + 31 * 1440 * MINUTE),  # exactly 31 days
    ],
)
async def test_certificate_time_boundaries(start: int, expiry: int) -> None:
    assert (await accepted(temp_request(temp_cert(start=start, expiry=expiry)))).scopes == ("test:scope-1",)


async def test_falsy_certificate_is_ignored() -> None:
    for cert in (None, False, 0, ""):
        assert (await accepted(signed("tester", "no-secret", {"certificate": cert}))).scopes == CLIENTS[
            "tester"
        ].scopes


async def test_named_certificate() -> None:
    cert = temp_cert(name="test:mine")
    got = await accepted(temp_request(cert, "test:mine"))
    assert (got.client_id, got.scopes) == ("test:mine", ("test:scope-1",))
    assert await refused(temp_request(cert, "test:other")) == (
        "ext.certificate.signature is not valid, or wrong clientId provided"
    )
    outside = temp_cert(name="other:mine")
    assert await refused(temp_request(outside, "other:mine")) == (
        "ext.certificate issuer `tester` doesn't have `auth:create-client:other:mine` for supplied clientId."
    )
    with_id = temp_cert(name="test:mine", clientId="ignored")
    assert (await accepted(temp_request(with_id, "test:mine"))).client_id == "test:mine"


@pytest.mark.parametrize(
    ("issuer", "client_id", "message"),
    [
        (5, "test:mine", "ext.certificate.issuer must be a string"),
        (["tester"], "test:mine", "ext.certificate.issuer must be a string"),
        ("tester", "tester", "ext.certificate.issuer must differ from the supplied clientId"),
        ("nobody", "test:mine", "Client with clientId 'nobody' not found"),
        ("off", "test:mine", "Client with clientId 'off' is disabled"),
    ],
)
async def test_certificate_issuer_refused(issuer: object, client_id: str, message: str) -> None:
    assert await refused(temp_request(temp_cert(issuer=issuer), client_id)) == message


async def test_issuer_cannot_be_temporary() -> None:
    # Credentials issued by temporary credentials: the issuer is looked up as a permanent client...
    mine = hawk.temporary_credentials(
        "tester",
        "no-secret",
        ["test:*"],
        start_ms=NOW - MINUTE,
        expiry_ms=NOW + MINUTE,
        client_id="test:mine",
    )
    nested = hawk.temporary_credentials(
        "test:mine",
        mine["accessToken"],
        ["test:a"],
        start_ms=NOW - MINUTE,
        expiry_ms=NOW + MINUTE,
        client_id="test:b",
    )
    req = signed("test:b", nested["accessToken"], {"certificate": json.loads(nested["certificate"])})
    assert await refused(req) == "Client with clientId 'test:mine' not found"
    # ... and an unnamed one signed with a temporary token does not verify against the issuer's token.
    unnamed = hawk.create_certificate(
        "tester",
        mine["accessToken"],
        ["test:a"],
        start_ms=NOW - MINUTE,
        expiry_ms=NOW + MINUTE,
        seed="S" * 44,
    )
    assert await refused(temp_request(unnamed)) == "ext.certificate.signature is not valid"


async def test_certificate_errors_win_over_bad_mac() -> None:
    req = signed("tester", "wrong", {"certificate": temp_cert(version=3)})
    assert await refused(req) == "ext.certificate.version must be 1"


async def test_mac_must_use_the_temporary_token() -> None:
    req = signed("tester", "no-secret", {"certificate": temp_cert()})
    assert await refused(req) == "Unauthorized: Bad mac"


async def test_certificate_with_authorized_scopes() -> None:
    cert = temp_cert(signed_scopes=["test:a", "test:b"])
    got = await accepted(temp_request(cert, authorizedScopes=["test:a"]))
    assert (got.scopes, got.authorized_scopes) == (("test:a", "test:b"), ("test:a",))
    message = await refused(temp_request(cert, authorizedScopes=["test:c"]))
    assert message.startswith("Supplied credentials do not satisfy authorizedScopes")
    assert "```\ntest:a\ntest:b\nassume:anonymous\n```" in message


def _roles(scopes: Sequence[str]) -> Sequence[str]:
    """A stand-in for role expansion: assume:role-x grants granted:*."""
    return [*scopes, "granted:*"] if "assume:role-x" in scopes else scopes


async def test_role_expansion_seam() -> None:
    cert = hawk.create_certificate(
        "role-user",
        "role-secret",
        ["granted:a"],
        start_ms=NOW - MINUTE,
        expiry_ms=NOW + MINUTE,
        seed="S" * 44,
    )
    req = signed("role-user", hawk.derive_access_token("role-secret", "S" * 44), {"certificate": cert})
    assert (await refused(req)).startswith("ext.certificate issuer `role-user` doesn't satisfy all")
    assert (await accepted(req, expand=_roles)).scopes == ("granted:a",)
    authorized = signed("role-user", "role-secret", {"authorizedScopes": ["granted:b"]})
    assert (await accepted(authorized, expand=_roles)).authorized_scopes == ("granted:b",)
    assert (await accepted(authorized, satisfies=lambda held, required: True)).scopes == ("assume:role-x",)


def test_temporary_credentials_limits() -> None:
    with pytest.raises(ValueError, match="31 days"):
        hawk.temporary_credentials("tester", "no-secret", [], start_ms=0, expiry_ms=31 * 86400_000 + 1)
    with pytest.raises(ValueError, match="differ"):
        hawk.temporary_credentials("tester", "no-secret", [], start_ms=0, expiry_ms=1, client_id="tester")
    made = hawk.temporary_credentials("tester", "no-secret", ["a"], start_ms=0, expiry_ms=1)
    cert = json.loads(made["certificate"])
    assert len(cert["seed"]) == 44 and len(made["accessToken"]) == 43
    assert list(cert) == ["version", "scopes", "start", "expiry", "seed", "signature"]
    assert "no-secret" not in repr(CLIENTS["tester"])


# ---------------------------------------------------------------------------------------------------
# Bewits.


def _signed_url(
    path_and_query: str, exp: int = T0 + 900, client_id: str = "root", key: str = "root-secret"
) -> str:
    """A URL with a bewit built the way the Python client's buildSignedUrl builds it."""
    url = ROOT_URL + path_and_query
    resource = mohawk.base.Resource(
        credentials={"id": client_id, "key": key, "algorithm": "sha256"},
        method="GET",
        ext="e30=",
        url=url,
        timestamp=exp,
        nonce="",
    )
    bewit = mohawk.bewit.get_bewit(resource).rstrip("=")
    return url + ("&" if "?" in url else "?") + f"bewit={bewit}"


async def test_bewit_methods_and_paths() -> None:
    url = _signed_url(f"/api/queue/v1/task/{TASK_ID}/artifacts/public%2Flog.txt?x=1")
    assert (await accepted(request_for(url, method="HEAD"))).via_bewit
    assert await refused(request_for(url, method="POST")) == "Unauthorized: Invalid method"
    other = url.replace("public%2Flog.txt", "private%2Fkey.txt")
    assert await refused(request_for(other)) == "Unauthorized: Bad mac"
    assert await refused(request_for(url.replace("x=1", "x=2"))) == "Unauthorized: Bad mac"
    assert (
        await refused(request_for(url.replace(ROOT_URL, "http://tc.example.com"))) == "Unauthorized: Bad mac"
    )


async def test_bewit_first_in_query_is_stripped() -> None:
    url = _signed_url("/api/queue/v1/task?a=1")
    path, query = url.split("?", 1)
    params = query.split("&")
    moved = f"{path}?{params[1]}&{params[0]}"  # /task?bewit=...&a=1
    assert (await accepted(request_for(moved))).client_id == "root"


def _bewit_url(inner: str) -> str:
    return f"{TASK_URL}?bewit=" + base64.urlsafe_b64encode(inner.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"{TASK_URL}?bewit=", "Unauthorized: Empty bewit"),
        (f"{TASK_URL}?bewit=ab.c", "Bad Request: Invalid bewit encoding"),
        (_bewit_url("root\\1704068100\\mac"), "Bad Request: Invalid bewit structure"),
        (_bewit_url("root\\\\mac\\"), "Bad Request: Missing bewit attributes"),
        (_bewit_url("\\1704068100\\mac\\"), "Bad Request: Missing bewit attributes"),
        (_bewit_url("root\\0\\mac\\"), "Bad Request: Missing bewit attributes"),
        (_bewit_url("root\\1704067200\\mac\\"), "Unauthorized: Access expired"),
        (_bewit_url("nobody\\1704068100\\mac\\"), "Client with clientId 'nobody' not found"),
        (_bewit_url("root\\1704068100\\mac\\"), "Unauthorized: Bad mac"),
        (_bewit_url("root\\1704068100\\mac\\!!!!"), "Failed to parse ext"),
        (TASK_URL + "?bewit=" + "a" * 4096, "Bad Request: Resource path exceeds max length"),
    ],
)
async def test_bewit_refused(url: str, message: str) -> None:
    assert await refused(request_for(url)) == message


async def test_bewit_expiry_boundary() -> None:
    url = _signed_url("/api/queue/v1/task/x", exp=T0 + 10)
    assert (await accepted(request_for(url), (T0 + 10) * 1000 - 1)).client_id == "root"
    assert await refused(request_for(url), (T0 + 10) * 1000) == "Unauthorized: Access expired"


async def test_a_header_carries_its_mac_for_the_replay_record_and_a_bewit_none() -> None:
    """The caller records a header's MAC until a replay of it would be stale (storage/port.py,
    Replays); a bewit is meant to be used again until it expires."""
    req = signed("root", "root-secret", ts=T0 - 60)
    mac = hawk.parse_authorization_header(req.authorization or "")["mac"]
    assert (await accepted(req)).replay_key == (mac, (T0 - 60) * 1000 + hawk.TIMESTAMP_SKEW_MS)
    assert (await accepted(request_for(_signed_url("/api/queue/v1/task")))).replay_key is None
