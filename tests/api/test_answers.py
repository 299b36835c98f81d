"""The documented answers: derived from the handlers' TypedDicts, required keys worked out right."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from taskyard.api import answers
from taskyard.api.app import service_tables
from taskyard.model import paging


class Item(TypedDict):
    name: str
    size: int | None
    kind: Literal["a", "b"]
    ratio: float
    tags: dict[str, list[str]]


class Listed(paging.Page):  # continuationToken is inherited from another module, NotRequired
    items: list[Item]
    note: NotRequired[bool]


def test_a_typeddict_becomes_an_object_with_its_required_keys() -> None:
    assert answers.json_schema(Listed) == {
        "type": "object",
        "properties": {
            "continuationToken": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "size": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                        "kind": {"enum": ["a", "b"]},
                        "ratio": {"type": "number"},
                        "tags": {
                            "type": "object",
                            "additionalProperties": {"type": "array", "items": {"type": "string"}},
                        },
                    },
                    "required": ["kind", "name", "ratio", "size", "tags"],
                },
            },
            "note": {"type": "boolean"},
        },
        "required": ["items"],
    }


def test_every_json_answer_of_the_services_is_documented() -> None:
    undocumented = {
        route.name
        for table in service_tables().values()
        for route in table
        if not answers.answer_schema(route)
    }
    # These answer a redirect, bytes or nothing: no JSON to document.
    assert undocumented == {
        "finishArtifact",
        "getArtifact",
        "getLatestArtifact",
        "findArtifactFromTask",  # the index's: a 303 to the artifact
        "deleteClient",
        "deleteRole",
        # notify's: the text `OK` or a 204, as TaskCluster's (matrix and slack: a 400)
        "email",
        "pulse",
        "matrix",
        "slack",
        "addDenylistAddress",
        "deleteDenylistAddress",
    }


def test_lists_document_their_token_as_optional() -> None:
    lists = [r for t in service_tables().values() for r in t if r.name.startswith("list")]
    assert len(lists) >= 10
    for route in lists:
        schema = answers.answer_schema(route)
        assert "continuationToken" not in schema.get("required", []), route.name  # type: ignore[operator]
