"""The one call pipeline: every API route called, over HTTP or by a page, and every guarded read.

`endpoint()` (api/app.py) turns an HTTP request into a `Call` (path parameters checked, body read
and parsed, the caller authenticated) and runs it with `run()`. The web UI runs the same routes,
found by name (`route()`), as the signed-in viewer or the anonymous caller (`call()`); a read of a
page that no API route answers is an `Operation`, its scope template declared with it, and runs
through `run()` too. Whatever the step, in this order:

1. the path parameters against their patterns (400 `InvalidRequestArguments`);
2. the body against the step's schema (400 `InputValidationError`, naming the field);
3. the scope template: before the handler when every value is known (no `loads`), else by the
   service the handler passes `call.authorize` to, on the record it loads (403
   `InsufficientScopes`);
4. the handler;
5. failing closed: if the step has scopes and `call.authorize()` never ran, its answer is thrown
   away and `UncheckedScopes` raised (a 500 over HTTP, an error page in the UI), never data.

So a page that forgets a check cannot show what it read: it cannot read without a step, and a
step that forgets its check answers nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from taskyard.api import authz
from taskyard.api.routing import Call, Route, ScopeExpression, check_params
from taskyard.api.tables import service_tables
from taskyard.model import schema, scopes
from taskyard.model.errors import InsufficientScopes
from taskyard.model.types import JSONValue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskyard.api.app import Services

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class UncheckedScopes(Exception):
    """A step with scopes answered without checking them: a bug, never an answer."""


class Step(Protocol[T_co]):
    """What the pipeline runs: a `Route`, or an `Operation`."""

    @property
    def name(self) -> str: ...
    @property
    def scopes(self) -> ScopeExpression | None: ...
    @property
    def loads(self) -> tuple[str, ...]: ...
    @property
    def scope_body(self) -> tuple[str, ...]: ...
    @property
    def edge_input(self) -> schema.Schema | None: ...
    @property
    def handler(self) -> Callable[[Call], Awaitable[T_co]]: ...


@dataclass(frozen=True)
class Operation(Generic[T]):
    """A read no API route answers (a page's aggregate: the dashboard's queues, a group's rows),
    declared with its scope template as a route is, and run only through `run()`, as a caller.

    `scopes` is required and may not be None: an operation has no public form. With no `loads` the
    pipeline checks it before the handler, with the call's parameters; with `loads`, the handler
    passes `call.authorize` to the service that loads the record. Either way a handler that
    answers without the check having run raises `UncheckedScopes`."""

    name: str
    scopes: ScopeExpression
    handler: Callable[[Call], Awaitable[T]]
    loads: tuple[str, ...] = ()
    scope_body: tuple[str, ...] = ()
    input: schema.Schema | None = None

    def __post_init__(self) -> None:
        if self.scopes is None:
            raise ValueError(f"operation {self.name} declares no scopes: every operation is guarded")

    @property
    def edge_input(self) -> schema.Schema | None:
        return self.input


@dataclass(frozen=True)
class Kept(Generic[T]):
    """What a listing keeps for its caller, and how many items it held back."""

    items: list[T]
    hidden: int


def listing(
    name: str,
    scopes: ScopeExpression,
    each: ScopeExpression,
    read: Callable[[Call], Awaitable[list[tuple[Mapping[str, object], T]]]],
) -> Operation[Kept[T]]:
    """An operation answering a list whose every item needs scopes of its own: `read` answers each
    item with the values of `each`, its template (a route's: `listTaskGroup`'s for a group), and
    only the items the caller holds `each` for are kept. The check is the listing's, not the
    reader's: an item cannot come out unchecked."""

    async def handler(call: Call) -> Kept[T]:
        found = await read(call)
        kept = [item for values, item in found if may(call, each, **values)]
        return Kept(kept, len(found) - len(kept))

    return Operation(name, scopes, handler)


async def run(step: Step[T], call: Call) -> T:
    """Run `step` for `call`: every check in order (see the module's docstring), then its handler."""
    check_params(call.params)
    if step.edge_input is not None:
        schema.validate(step.edge_input, call.body, where="body")
    if step.scopes is not None and not step.loads:
        call.authorize()
    result = await step.handler(call)
    if step.scopes is not None and not call.authorized:
        raise UncheckedScopes(f"{step.name} answered without checking its scopes")
    return result


async def call(
    services: Services,
    caller: authz.Caller,
    step: Step[T],
    params: Mapping[str, str],
    body: JSONValue = None,
    query: Mapping[str, str] | None = None,
) -> T:
    """`step` run as `caller` with `params`, `body` and `query`, as `endpoint()` runs a request's:
    the API's own errors raised (403 naming the missing scopes, 404, 409, 400 naming the field)."""
    asked = dict(query or {})
    made = Call(
        step.name,
        dict(params),
        asked,
        body,
        caller,
        services,
        step.scopes,
        scope_body=step.scope_body,
        query_items=tuple(asked.items()),
    )
    return await run(step, made)


def route(name: str, service: str = "queue") -> Route:
    """The route of `service` called `name` (createTask, status, listTaskGroup, ...)."""
    found = [r for r in service_tables()[service] if r.name == name]
    if len(found) != 1:
        raise LookupError(f"the {service} service has no route {name}")
    return found[0]


def may(call: Call, template: ScopeExpression | None, **values: object) -> bool:
    """Whether the call's caller holds `template` rendered with `values`: for an operation already
    authorized as a whole, which shows each item of what it read only to a caller who may read
    that item through the API (a queue's counts, a recent group)."""
    if template is None:
        return True
    try:
        authz.require(call.caller, template, values)
    except InsufficientScopes:
        return False
    return True


def needs(template: ScopeExpression | None, values: Mapping[str, object]) -> str:
    """The scope expression `template` asks for with `values`, as the API's refusal shows it."""
    expression = scopes.render(template, values) if template is not None else None
    if expression is None:
        return ""
    return expression if isinstance(expression, str) else json.dumps(expression)
