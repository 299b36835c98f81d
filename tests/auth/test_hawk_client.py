"""The CLI's Hawk signatures, checked by mohawk (an independent implementation) rather than our own server."""

from __future__ import annotations

import base64
import json

import mohawk
import pytest

from taskyard.auth import hawk_client
from taskyard.cli import http

CREDENTIALS = {"id": "cli/signer", "key": "signer-access-token", "algorithm": "sha256"}


def receive(header: str, url: str, method: str, body: bytes) -> mohawk.Receiver:
    return mohawk.Receiver(
        lambda client_id: CREDENTIALS if client_id == CREDENTIALS["id"] else None,
        header,
        url,
        method,
        content=body,
        content_type=http.JSON_TYPE,
        seen_nonce=None,
    )


def test_a_signed_body_and_certificate_pass_mohawk() -> None:
    url = "http://Localhost:8080/api/auth/v1/clients/a%2Fb?prefix=x%2F"
    body = json.dumps({"scopes": ["queue:get-task:*"]}).encode()
    ext = hawk_client.certificate_ext('{"version": 1, "seed": "s"}')
    header = hawk_client.sign_header(
        "PUT", url, body, http.JSON_TYPE, "cli/signer", "signer-access-token", ext=ext
    )
    received = receive(header, url, "PUT", body)
    assert received.parsed_header["hash"] and received.parsed_header["ext"] == ext


def test_a_signature_is_refused_for_another_body_or_token() -> None:
    url = "https://example.com/api/auth/v1/scopes/expand"
    header = hawk_client.sign_header("POST", url, b"{}", http.JSON_TYPE, "cli/signer", "signer-access-token")
    with pytest.raises(mohawk.exc.MisComputedContentHash):
        receive(header, url, "POST", b"[]")
    forged = hawk_client.sign_header("POST", url, b"{}", http.JSON_TYPE, "cli/signer", "another-token")
    with pytest.raises(mohawk.exc.MacMismatch):
        receive(forged, url, "POST", b"{}")


def test_the_certificate_travels_as_taskclusters_client_sends_it() -> None:
    ext = hawk_client.certificate_ext({"version": 1})
    assert ext is not None and hawk_client.certificate_ext("") is None
    assert json.loads(base64.urlsafe_b64decode(ext)) == {"certificate": {"version": 1}}


def test_the_connection_never_shows_its_secrets() -> None:
    shown = repr(http.Connection("http://x", "cli/c", "the-access-token", '{"signature": "sig"}'))
    assert "the-access-token" not in shown and "sig" not in shown
