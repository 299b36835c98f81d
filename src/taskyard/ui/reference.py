"""The APIs page (`/api`) and each service's reference (`/api/<service>/v1/reference`), as pages of
the UI: with its header and stylesheet, each route a readable entry (its method and path, the
scopes it needs, a table of its body's fields and of its answer's).

The API serves both paths (they are under `/api/`, where no page is) and asks the app's `Site` to
render them (`api.app.Site.apis_page`, `reference_page`); without a UI it answers plain HTML of its
own. The reference is drawn from the service's OpenAPI document (`api/openapi.py`, served as
`openapi.json` beside it), so nothing is written twice. Both are public, as the API's indexes are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from taskyard.model.apis import API_VERSION as VERSION
from taskyard.model.apis import command_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.ui.render import UI

MOST_FIELDS = 400  # rows of one schema's table; a deeper answer says it has more
MOST_DEPTH = 8


@dataclass(frozen=True)
class Field:
    """One row of a schema's table: a field's path (`metadata.name`, `runs[].state`), its type, and
    the rule its value must follow."""

    name: str
    kind: str
    required: bool
    rule: str
    depth: int


@dataclass
class Operation:
    name: str
    method: str
    path: str  # the full path, `/api/<service>/v1/...`
    stability: str
    scopes: Any  # the scope expression (None: public)
    params: list[Field] = field(default_factory=list)
    body: list[Field] | None = None
    body_more: bool = False
    answer: list[Field] = field(default_factory=list)
    answer_more: bool = False
    answer_kind: str = ""  # the answer's type when it is not an object with fields


def kind_of(schema: dict[str, Any]) -> str:
    """A schema's type in words: `string (date-time)`, `array of string`, `one of: a, b`..."""
    if not schema:
        return "any JSON value"
    if "enum" in schema:
        return "one of: " + ", ".join(str(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(kind_of(s) for s in schema["anyOf"])
    kind = schema.get("type", "any JSON value")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "string" and "format" in schema:
        return f"string ({schema['format']})"
    if kind == "array":
        return "array of " + kind_of(schema.get("items", {}))
    if (
        kind == "object"
        and isinstance(schema.get("additionalProperties"), dict)
        and not schema.get("properties")
    ):
        return "object: any keys, each " + kind_of(schema["additionalProperties"])
    return str(kind)


def _range(low: object, high: object, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    if high is not None:
        return f"at most {high}{unit}"
    return f"at least {low}{unit}" if low is not None else ""


def rule_of(schema: dict[str, Any]) -> str:
    """What a value must be beyond its type: lengths, bounds, a pattern, item counts."""
    parts = [
        _range(schema.get("minLength"), schema.get("maxLength"), " characters"),
        _range(schema.get("minimum"), schema.get("maximum")),
        f"at most {schema['maxItems']} items" if "maxItems" in schema else "",
        "no item twice" if schema.get("uniqueItems") else "",
        f"matches {schema['pattern']}" if "pattern" in schema else "",
    ]
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, dict) and items.get("type") != "object":
        inner = rule_of(items)
        parts.append(f"each item: {inner}" if inner else "")
    if (
        schema.get("type") == "object"
        and schema.get("additionalProperties") is False
        and schema.get("properties")
    ):
        parts.append("no other fields")
    return "; ".join(p for p in parts if p)


def fields(schema: dict[str, Any], most: int = MOST_FIELDS) -> tuple[list[Field], bool]:
    """The fields of an object schema, nested ones after their parent (`a.b`, `a[].b`), at most
    `most` of them; and whether there were more."""
    found: list[Field] = []
    more = False

    def walk(node: dict[str, Any], prefix: str, depth: int) -> None:
        nonlocal more
        required = set(node.get("required", []))
        for name, sub in node.get("properties", {}).items():
            if len(found) >= most:
                more = True
                return
            path = f"{prefix}{name}"
            found.append(Field(path, kind_of(sub), name in required, rule_of(sub), depth))
            if depth >= MOST_DEPTH:
                continue
            if sub.get("properties"):
                walk(sub, path + ".", depth + 1)
            items = sub.get("items") if sub.get("type") == "array" else None
            if isinstance(items, dict) and items.get("properties"):
                walk(items, path + "[].", depth + 1)

    walk(schema, "", 0)
    return found, more


def operations(service: str, document: dict[str, Any]) -> list[Operation]:
    """Each operation of the service's OpenAPI document, ready to show."""
    found = []
    base = f"/api/{service}/{VERSION}"
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            params = [
                Field(p["name"], "string", True, rule_of(p.get("schema", {})), 0)
                for p in op.get("parameters", [])
            ]
            entry = Operation(
                op["operationId"],
                method.upper(),
                base + path,
                op["x-taskcluster-stability"],
                op.get("x-taskcluster-scopes"),
                params,
            )
            body = op.get("requestBody")
            if body is not None:
                entry.body, entry.body_more = fields(body["content"]["application/json"]["schema"])
            answer = op["responses"]["200"]["content"]["application/json"]["schema"]
            entry.answer, entry.answer_more = fields(answer)
            if not entry.answer:
                entry.answer_kind = kind_of(answer)
            found.append(entry)
    return found


async def apis_page(ui: UI, request: Request, root_url: str, services: list[str]) -> Response:
    return await ui.page(
        request,
        "apis.html",
        root_url=root_url,
        services=services,
        api_version=VERSION,
        command_line=command_line(root_url),
    )


async def reference_page(ui: UI, request: Request, service: str, document: dict[str, Any]) -> Response:
    found = operations(service, document)
    return await ui.page(
        request,
        "reference.html",
        service=service,
        operations=found,
        api_version=VERSION,
        info=document["info"],
    )
