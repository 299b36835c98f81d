"""What taskyard takes from its dependencies that they do not promise to keep, in one place.

A private name (`starlette._utils`, `FileResponse._parse_range_header`, uvicorn's `_TrustedHosts`,
`asyncio.Lock._waiters`), a private module (`uvicorn.protocols.http.httptools_impl`), a
constructor skipped (`Response.__new__`): each is in one module of this package, with why, and
nowhere else (`tests/test_layers.py` refuses a private import outside it). A module per
dependency, so that a package imports only the framework it may (`web`: starlette, for `api/`,
`ui/` and `cli/`; `server`: uvicorn, for `cli/`; `locks`: asyncio, for `storage/`; `amqp`: aiormq,
for `events/`).

`CHECKED` holds the versions these uses were checked against: `tests/test_internals.py` fails
outside them, naming the range, and checks that each use still exists and behaves as assumed.
pyproject.toml's bounds on these packages are the same. To take a newer version: raise its upper
bound in both places, `make lock`, and run `tests/test_internals.py` and the tests its checks
name; a check that fails says which use to mend.

Relied on beyond these modules, as undocumented behaviour rather than private names, and held by
their own tests: `api/router.py`'s `IndexedRouter` answers as Starlette's `Router` scan would
(`Route.path_regex`, `param_convertors`, the child scope; tests/api/test_router_index.py), and
`cli/connections.py`'s `HeadTimeoutProtocol` is a subclass of uvicorn's httptools protocol
(`server.HttpToolsProtocol`, whose hooks and attributes it uses are listed there and checked).
"""

from __future__ import annotations

# package: (the oldest version checked, the newest version checked); a version is within when it
# is at least the first and its major.minor at most the second's (pyproject.toml: >=first, <next minor).
CHECKED: dict[str, tuple[str, str]] = {
    "starlette": ("0.39", "1.10"),
    "uvicorn": ("0.31", "0.54"),
    "aiormq": ("7.2.4", "7.2"),
}
