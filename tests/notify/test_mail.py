"""The SMTP client against a real SMTP server (aiosmtpd): STARTTLS when the server offers it (and
AUTH only over it), and plain SMTP when it does not."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from taskyard.notify import mail
from tests.ports import free_port


class Box:
    def __init__(self) -> None:
        self.got: list[tuple[bool, bytes]] = []  # (over TLS, content)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.got.append((session.ssl is not None, envelope.original_content or b""))
        return "250 OK"


def check(server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any) -> AuthResult:
    return AuthResult(success=isinstance(data, LoginPassword) and data.password == b"pw")


def certificate(where: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Box, int]]:
    cert, key = certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this server's certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box, port = Box(), free_port()
    controller = Controller(
        box,
        hostname="127.0.0.1",
        port=port,
        tls_context=context,
        require_starttls=True,
        authenticator=check,
        auth_required=True,
    )
    controller.start()
    yield box, port
    controller.stop()


async def test_starttls_is_used_when_offered_and_the_login_goes_over_it(tls_server: tuple[Box, int]) -> None:
    box, port = tls_server
    smtp = mail.parse_url(f"smtp://user:pw@127.0.0.1:{port}?from=ci@x.test")
    await mail.send(smtp, mail.message(smtp, "me@x.test", "subject", "body"))
    ((over_tls, content),) = box.got
    assert over_tls and b"Subject: subject" in content


async def test_plain_smtp_when_the_server_offers_no_starttls() -> None:
    box, port = Box(), free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        smtp = mail.parse_url(f"smtp://127.0.0.1:{port}")
        await mail.send(smtp, mail.message(smtp, "me@x.test", "s", "b"))
    finally:
        controller.stop()
    ((over_tls, _),) = box.got
    assert not over_tls
