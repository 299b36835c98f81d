"""The poll protocol's pure rules (model/azure_queue.py) as properties: whatever a client puts in a
SAS query is refused with one of Azure's errors unless it is the token handed out, and whatever
text an answer carries, its XML parses and gives the text back."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from hypothesis import given
from hypothesis import strategies as st

from taskyard.model import azure_queue
from taskyard.model.azure_queue import AzureError, QueueMessage, SasSigner
from tests.model.properties import PROPERTIES

NOW = 1_800_000_000_000
SIGNER = SasSigner("secret")
TOKEN = SIGNER.token("queue-a", NOW - 1000, NOW + 60_000)
SAS_KEYS = ["sv", "st", "se", "sp", "sig", "si", "sip", "spr"]
field_values = st.one_of(
    st.text(max_size=30), st.sampled_from([*TOKEN.values(), "raup", "a", "2015-04-05", ""])
)


@PROPERTIES
@given(
    query=st.dictionaries(st.sampled_from(SAS_KEYS), field_values),
    needed=st.sampled_from(["r", "p", "a", "u"]),
)
def test_any_sas_query_is_checked_with_an_azure_error(query: dict[str, str], needed: str) -> None:
    try:
        SIGNER.check("queue-a", query, NOW, needed)
    except AzureError as refused:
        assert refused.status == 403
        assert refused.code in ("AuthenticationFailed", "AuthorizationPermissionMismatch")
    else:  # only a query signed as the token was passes
        assert all(query[k] == TOKEN[k] for k in ("sp", "se", "sig", "sv")) and needed in TOKEN["sp"]


@PROPERTIES
@given(key=st.sampled_from(SAS_KEYS), value=field_values, offset=st.integers(-120_000, 120_000))
def test_a_token_with_one_field_changed_or_out_of_its_time_is_refused(
    key: str, value: str, offset: int
) -> None:
    query = {**TOKEN, key: value}
    now = NOW + offset
    accepted = value == TOKEN.get(key, "") and NOW - 1000 <= now <= NOW + 60_000
    if key in ("sip", "spr") and value:  # not in the token, but signed: adding one breaks the signature
        accepted = False
    try:
        SIGNER.check("queue-a", query, now, "p")
    except AzureError as refused:
        assert refused.status == 403
        assert not accepted, (key, value, offset)
    else:
        assert accepted, (key, value, offset)


def _as_parsed(text: str) -> str:
    """`text` as an XML parser gives it back: line ends become `\n`, what XML cannot hold `?`."""
    return azure_queue._NOT_XML.sub("?", text).replace("\r\n", "\n").replace("\r", "\n")


# What the server puts in a message list is its own text (ids, receipts, base64), never a client's:
# any text XML can hold.
xml_text = st.text(max_size=40).filter(lambda t: azure_queue._NOT_XML.search(t) is None)


@PROPERTIES
@given(text=xml_text, message_id=xml_text, receipt=xml_text)
def test_message_lists_parse_and_carry_their_text(text: str, message_id: str, receipt: str) -> None:
    message = QueueMessage(message_id, NOW, NOW + 1000, 1, text, pop_receipt=receipt, visible=NOW)
    parsed = ElementTree.fromstring(azure_queue.messages_xml([message])).find("QueueMessage")
    assert parsed is not None
    assert (parsed.findtext("MessageText"), parsed.findtext("PopReceipt")) == (
        _as_parsed(text),
        _as_parsed(receipt),
    )
    assert parsed.findtext("MessageId") == _as_parsed(message_id)


@PROPERTIES
@given(detail=st.text(max_size=40))
def test_error_bodies_parse_whatever_their_details_hold(detail: str) -> None:
    # A client's text (a query value) is shown in the details, what XML cannot hold as `?`.
    error = azure_queue.invalid_query("popreceipt", detail, "Invalid pop receipt format.")
    parsed = ElementTree.fromstring(azure_queue.error_xml(error, "request-1", NOW))
    assert parsed.findtext("Code") == "InvalidQueryParameterValue"
    assert parsed.findtext("QueryParameterValue") == _as_parsed(detail)
