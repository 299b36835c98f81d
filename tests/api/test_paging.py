"""`limit` and `continuationToken` on every list route: malformed ones are 400, never a 500 or a restart."""

from __future__ import annotations

import base64

import httpx

from taskyard.model import paging
from tests.api.conftest import TASK_QUEUE_ID, Api

QUEUE = TASK_QUEUE_ID.replace("/", "%2F")
PROVISIONER, WORKER_TYPE = TASK_QUEUE_ID.split("/")

BAD_LIMITS = ["abc", "-1", "1.5", "", "1e3", " 1", "0x10", "\u0661", "1,2"]
TOKEN_CODES = ("InputError", "InvalidRequestArguments")


def token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# Tokens this server never hands out: not base64, not JSON, JSON of the wrong shape or types.
GARBAGE_TOKENS = [
    "garbage!!",
    "%%%",
    "\u00e9t\u00e9",
    "AAAA",
    "a",
    "x" * 5000,
    token(b"not json"),
    token(b"null"),
    token(b"[]"),
    token(b"17"),
    token(b'"o"'),
    token(b"{}"),
    token(b'{"o": -1}'),
    token(b'{"o": "10"}'),
    token(b'{"o": 1.5}'),
    token(b'{"o": null}'),
    token(b'{"k": 5}'),
    token(b'{"k": []}'),
    token(b'{"k": [1, 2, 3, 4, 5]}'),
    token(b'{"k": [{"a": 1}, [1]]}'),
    token(b'{"k": [true, false]}'),
    token(b'{"k": [null, null]}'),
    token(b'{"k": ["\\ud800", "x"]}'),
    token(b"\xff\xfe\xfd"),
]
# Well-formed JSON whose numbers do not fit a 64-bit database integer.
OUT_OF_RANGE_TOKENS = [
    token(b'{"o": 9223372036854775808}'),
    token(b'{"o": 18446744073709551615}'),
    token(b'{"k": [9223372036854775808, "x"]}'),
    token(b'{"k": [18446744073709551615, "x"]}'),
    token(b'{"k": [18446744073709551615]}'),
]
# Well-formed JSON whose strings hold NUL, which PostgreSQL text cannot store.
NUL_TOKENS = [
    token(b'{"k": ["\\u0000"]}'),
    token(b'{"k": ["\\u0000", "\\u0000"]}'),
    token(b'{"k": [1, "\\u0000"]}'),
]


async def list_routes(api: Api) -> list[str]:
    """A path for every list route, each answering 200 without paging arguments."""
    task_id, _ = await api.create_task()
    paths = [
        f"/task-group/{task_id}/list",
        f"/task/{task_id}/dependents",
        f"/task-queues/{QUEUE}/pending",
        f"/task-queues/{QUEUE}/claimed",
        "/task-queues",
        "/provisioners",
        f"/provisioners/{PROVISIONER}/worker-types",
        f"/provisioners/{PROVISIONER}/worker-types/{WORKER_TYPE}/workers",
    ]
    for path in paths:
        response = await api.call("GET", path)
        assert response.status_code == 200, (path, response.text)
    return paths


def token_failure(
    path: str, bad: str, response: httpx.Response, *, may_page: bool = False
) -> tuple[object, ...] | None:
    if may_page and response.status_code == 200:
        return None
    if response.status_code != 400:
        return (path, bad[:60], response.status_code, response.text[:160])
    body = response.json()
    if body.get("code") not in TOKEN_CODES or "continuationToken" not in body.get("message", ""):
        return (path, bad[:60], body)
    return None


async def check_tokens(api: Api, tokens: list[str], *, may_page: bool = False) -> list[tuple[object, ...]]:
    """Failures among `tokens` on every list route; `may_page`: a 200 page is acceptable, too."""
    failures = []
    for path in await list_routes(api):
        for bad in tokens:
            response = await api.call("GET", path, query={"continuationToken": bad})
            failure = token_failure(path, bad, response, may_page=may_page)
            if failure:
                failures.append(failure)
    return failures


async def test_bad_limit_is_400_on_every_list_route(api: Api) -> None:
    failures = []
    for path in await list_routes(api):
        for bad in BAD_LIMITS:
            response = await api.call("GET", path, query={"limit": bad})
            if response.status_code != 400:
                failures.append((path, bad, response.status_code, response.text[:160]))
                continue
            body = response.json()
            if body["code"] != "InvalidRequestArguments" or "limit" not in body["message"]:
                failures.append((path, bad, body))
        # A huge limit is clamped to the maximum, not refused.
        response = await api.call("GET", path, query={"limit": "99999999999999999999"})
        assert response.status_code == 200, (path, response.text)
    assert not failures, "\n".join(map(str, failures))


async def test_garbage_continuation_token_is_400_on_every_list_route(api: Api) -> None:
    failures = await check_tokens(api, GARBAGE_TOKENS)
    assert not failures, "\n".join(map(str, failures))


async def test_boolean_offset_token_is_400(api: Api) -> None:
    """`{"o": true}` is not an offset: `isinstance(True, int)` must not make it offset 1 silently."""
    failures = await check_tokens(api, [token(b'{"o": true}'), token(b'{"o": false}')])
    assert not failures, "\n".join(map(str, failures))


async def test_out_of_range_continuation_token_is_not_a_500(api: Api) -> None:
    """Offsets and keys are checked for type and sign but not size: 2**63 reaches SQL and fails there.

    A 400 is best; an empty page past the end would do. A 500 is not acceptable.
    """
    failures = await check_tokens(api, OUT_OF_RANGE_TOKENS, may_page=True)
    assert not failures, "\n".join(map(str, failures))


async def test_continuation_token_with_nul_is_not_a_500(api: Api) -> None:
    """A key string holding NUL decodes fine but PostgreSQL refuses it as a text parameter (a 500 there)."""
    failures = await check_tokens(api, NUL_TOKENS, may_page=True)
    assert not failures, "\n".join(map(str, failures))


async def test_tokens_handed_out_page_through(api: Api) -> None:
    """The other side of the contract: a real token and limit work, and the last page has no token."""
    group_id, _ = await api.create_task()
    for _ in range(2):
        await api.create_task(taskGroupId=group_id)
    seen: list[str] = []
    query: dict[str, str] = {"limit": "2"}
    for _ in range(5):
        response = await api.call("GET", f"/task-group/{group_id}/list", query=query)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [t["status"]["taskId"] for t in page["tasks"]]
        if "continuationToken" not in page:
            break
        query = {"limit": "2", "continuationToken": page["continuationToken"]}
    assert len(seen) == len(set(seen)) == 3
    assert paging.MAX_LIMIT == 1000
