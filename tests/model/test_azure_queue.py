"""The poll protocol's pure rules: queue names, message signatures, SAS tokens, query values, XML."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ElementTree

import pytest

from taskyard.model import azure_queue
from taskyard.model.azure_queue import AzureError, QueueMessage, SasSigner, Signatures

NOW = 1_800_000_000_000


def test_queue_names_are_valid_azure_names_one_per_priority() -> None:
    names = {azure_queue.queue_name("Prov_1", "worker-type", rank) for rank in range(1, 8)}
    assert len(names) == 7
    for name in names:
        assert re.fullmatch(r"queue-[a-z2-7]{24}-[a-z2-7]{24}-[1-7]", name), name
        assert len(name) <= 63
    assert azure_queue.queue_name("a", "b", 1) != azure_queue.queue_name("b", "a", 1)


def test_message_signatures() -> None:
    signatures = Signatures("secret")
    signature = signatures.sign("task", 0)
    assert signatures.matches("task", 0, signature)
    assert not signatures.matches("task", 1, signature)
    assert not Signatures("other").matches("task", 0, signature)
    assert not signatures.matches("task", 0, "")
    text = azure_queue.message_text("task", 0, signature)
    assert base64.b64decode(text) == f'{{"taskId":"task","runId":0,"signature":"{signature}"}}'.encode()


def test_sas_tokens_are_checked() -> None:
    signer = SasSigner("secret")
    token = signer.token("queue-a", NOW - 1000, NOW + 60_000)
    assert set(token) == {"sv", "st", "se", "sp", "sig"} and token["sp"] == "rp"
    signer.check("queue-a", token, NOW, "p")
    signer.check("queue-a", token, NOW, "r")
    cases: list[tuple[str, dict[str, str], int, str, str]] = [
        ("queue-b", token, NOW, "p", "AuthenticationFailed"),  # another queue
        ("queue-a", {**token, "sp": "raup"}, NOW, "p", "AuthenticationFailed"),  # widened
        ("queue-a", {k: v for k, v in token.items() if k != "sig"}, NOW, "p", "AuthenticationFailed"),
        ("queue-a", {**token, "sig": token["sig"][:-2] + "AA"}, NOW, "p", "AuthenticationFailed"),
        ("queue-a", token, NOW + 61_000, "p", "AuthenticationFailed"),  # expired
        ("queue-a", token, NOW - 2000, "p", "AuthenticationFailed"),  # not yet valid
        ("queue-a", {**token, "si": "policy"}, NOW, "p", "AuthenticationFailed"),
        ("queue-a", {**token, "sv": "2015-04-05"}, NOW, "p", "AuthenticationFailed"),
        ("queue-a", token, NOW, "a", "AuthorizationPermissionMismatch"),  # never granted
    ]
    for queue, query, now, needed, code in cases:
        with pytest.raises(AzureError) as refused:
            signer.check(queue, query, now, needed)
        assert (refused.value.status, refused.value.code) == (403, code), (queue, query, now, needed)
    with pytest.raises(AzureError):
        SasSigner("other").check("queue-a", token, NOW, "p")


def test_whole_numbers_in_range() -> None:
    assert azure_queue.whole_in_range({}, "n", 1, 1, 32) == 1
    assert azure_queue.whole_in_range({"n": "32"}, "n", 1, 1, 32) == 32
    for value, code in [
        ("0", "OutOfRange"),
        ("33", "OutOfRange"),
        ("x", "Invalid"),
        ("-1", "Invalid"),
        ("²", "Invalid"),
        ("9" * 40, "Invalid"),
    ]:
        with pytest.raises(AzureError) as bad:
            azure_queue.whole_in_range({"n": value}, "n", 1, 1, 32)
        assert bad.value.status == 400 and bad.value.code.startswith(code)
        assert bad.value.details["QueryParameterName"] == "n"


def test_pop_receipts() -> None:
    receipts = {azure_queue.new_pop_receipt() for _ in range(20)}
    assert len(receipts) == 20
    for receipt in receipts:
        assert azure_queue.check_pop_receipt(receipt) == receipt
    for bad in ("", None, "abc", "!!!!", base64.b64encode(b"x" * 18).decode()):
        with pytest.raises(AzureError) as refused:
            azure_queue.check_pop_receipt(bad)
        assert refused.value.status == 400


def test_xml_bodies() -> None:
    got = QueueMessage("id-1", NOW, NOW + 1000, 2, "dGV4dA==", pop_receipt="r+/=", visible=NOW + 30_000)
    peeked = QueueMessage("id-2", NOW, NOW + 1000, 0, "dGV4dA==")
    root = ElementTree.fromstring(azure_queue.messages_xml([got, peeked]))
    first, second = root.findall("QueueMessage")
    assert [e.tag for e in first] == [
        *("MessageId", "InsertionTime", "ExpirationTime", "PopReceipt"),
        *("TimeNextVisible", "DequeueCount", "MessageText"),
    ]  # fmt: skip
    assert first.findtext("InsertionTime", "").endswith(" GMT") and first.findtext("PopReceipt") == "r+/="
    assert [e.tag for e in second] == [
        "MessageId",
        "InsertionTime",
        "ExpirationTime",
        "DequeueCount",
        "MessageText",
    ]
    error = ElementTree.fromstring(
        azure_queue.error_xml(azure_queue.out_of_range("n", "<33>", 1, 32), "rid", NOW)
    )
    assert error.findtext("Code") == "OutOfRangeQueryParameterValue"
    assert (
        "RequestId:rid" in error.findtext("Message", "") and error.findtext("QueryParameterValue") == "<33>"
    )


def test_message_ids_are_random_uuids_written_as_uuid_writes_them() -> None:
    import uuid

    ids = {azure_queue.new_message_id() for _ in range(200)}
    assert len(ids) == 200
    for message_id in ids:
        parsed = uuid.UUID(message_id)
        assert str(parsed) == message_id and parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert azure_queue.could_be_message_id(message_id)


def test_error_text_shows_exactly_what_xml_cannot_hold_as_question_marks() -> None:
    """XML 1.0's characters: tab, newline, carriage return, U+0020-U+D7FF, U+E000-U+FFFD, U+10000 up."""
    allowed = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
    everything = "".join(map(chr, range(0x110000)))
    shown = azure_queue._NOT_XML.sub("?", everything)
    assert [i for i, c in enumerate(shown) if c == "?" and everything[i] != "?"] == [
        i for i, c in enumerate(everything) if not allowed.fullmatch(c)
    ]
