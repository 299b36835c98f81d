"""The fuzzer's hostile values: texts, numbers, JSON bodies and their mutations, Hawk headers.

Everything draws from one `random.Random`, so a seed names a whole run.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from taskyard.auth import hawk

# Texts that have broken parsers somewhere: empty, control characters, other scripts' digits,
# percent-encodings (already encoded, invalid, overlong), dot segments, separators, big numbers.
TEXTS = [
    "",
    " ",
    "x",
    "\x00",
    "a\x00b",
    "\n",
    "a\r\nb",
    "\t",
    "\x7f",
    "caf\u00e9",
    "\u6f22\u5b57",
    "\U0001f600",
    "\u202e",
    "\ufeff",
    "\udcff",
    "null",
    "true",
    "[]",
    "{}",
    "0",
    "00",
    "01",
    "-1",
    "+1",
    "1.5",
    "1e3",
    "1e999",
    "0x10",
    "NaN",
    "Infinity",
    "\u00b2",
    "\u0661\u0662",
    "\U0001d7ce",
    "\u0663",
    "\u2070",
    "9" * 20,
    "9" * 5000,
    "-" + "9" * 30,
    ".",
    "..",
    "../..",
    "a/../b",
    "/",
    "//",
    "a/b",
    "a//b",
    "%",
    "%zz",
    "%2F",
    "%252F",
    "%00",
    "%C2%B2",
    "%C0%AF",
    "%FF",
    "?",
    "#",
    ";",
    "&",
    "=",
    "\\",
    '"',
    "'",
    "<script>",
    "' OR 1=1 --",
    "${jndi}",
    "*",
    "assume:*",
    "highest",
    "2024-01-31T12:00:00.000Z",
    "0001-01-01T00:00:00.000Z",
    "9999-12-31T23:59:59.999Z",
    "275760-09-13T00:00:00.000Z",
    "2024-02-30T00:00:00.000Z",
    "2024-01-31T12:00:00.000\u0662Z",
]
NUMBERS: list[Any] = [
    0,
    -0.0,
    1,
    -1,
    32,
    33,
    50,
    1.5,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    1e308,
    -1e308,
    5e-324,
]
LONG = [22, 23, 38, 39, 255, 256, 1001, 4097, 10001]


class Values:
    def __init__(self, rng: random.Random, *, body_limit: int) -> None:
        self.rng = rng
        self.body_limit = body_limit

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, choices: list[tuple[float, Callable[[], Any]]]) -> Any:
        """One of the weighted makers, called."""
        weights = [w for w, _ in choices]
        (_, make), *_ = self.rng.choices(choices, weights)
        return make()

    # Texts ------------------------------------------------------------------------------------

    def text(self) -> str:
        rng = self.rng
        return self.pick(
            [
                (10, lambda: rng.choice(TEXTS)),
                # a NUL or another control character in a plausible value (PostgreSQL refuses NUL)
                (
                    3,
                    lambda: (
                        rng.choice(["a", "text/plain", ""]) + rng.choice("\x00\x00\x00\n\x7f\u2028") + "z"
                    ),
                ),
                (2, lambda: rng.choice("x\u00e9\x00\u6f22/.%9") * rng.choice(LONG)),
                (2, lambda: "".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(1, 12)))),
                (2, lambda: rng.choice(TEXTS) + rng.choice(TEXTS)),
            ]
        )

    def number_text(self) -> str:
        """A query or header value that a parser of whole numbers meets."""
        rng = self.rng
        return self.pick(
            [
                (4, lambda: rng.choice(TEXTS[16:37])),
                (3, lambda: str(rng.choice(NUMBERS))),
                (2, lambda: str(rng.randint(-5, 10 ** rng.randint(1, 20)))),
                (1, self.text),
            ]
        )

    def url_part(self, value: str) -> str:
        """`value` percent-encoded for a URL: fully, keeping `/`, or keeping `%` (pre-encoded)."""
        rng = self.rng
        safe = rng.choice(["", "", "/", "/%", "/%:@!$&'()*+,;=", "%."])
        if self.chance(0.05):
            return quote(self.raw_bytes(8), safe=safe)  # not UTF-8 at all
        return quote(value, safe=safe, errors="surrogatepass")

    def raw_bytes(self, n: int) -> bytes:
        return bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, n)))

    # JSON -------------------------------------------------------------------------------------

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        kind = rng.randint(0, 9 if depth < 4 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return rng.choice([True, False])
        if kind == 2:
            return rng.choice(NUMBERS)
        if kind in (3, 4, 5):
            return self.text()
        if kind in (6, 7):
            return [self.value(depth + 1) for _ in range(rng.randint(0, 4))]
        if kind == 8:
            return {self.text(): self.value(depth + 1) for _ in range(rng.randint(0, 4))}
        return self.nested(rng.choice([10, 63, 64, 65, 100, 900]))

    def nested(self, depth: int) -> Any:
        value: Any = self.rng.choice([[], {}, "x", None, 1])
        for _ in range(depth):
            value = [value] if self.chance(0.5) else {"a": value}
        return value

    def big(self) -> Any:
        """A value too big for any field: a long string, a long array, a wide object."""
        n = self.rng.choice([1000, 10001, 100001])
        return self.pick(
            [
                (1, lambda: "x" * n),
                (1, lambda: ["x"] * (n // 10)),
                (1, lambda: list(range(n // 10))),
                (1, lambda: {f"k{i}": i for i in range(n // 100)}),
            ]
        )

    def scopes(self) -> list[str]:
        """A list of scopes that passes a schema's pattern but not much else: roles assuming
        roles, stars, long and many scopes, duplicates."""
        rng = self.rng
        pool = ["*", "assume:*", "assume:fuzz-role", "assume:client-id:*", "assume:anonymous", "queue:*", ""]
        pool += [
            "assume:fuzz-role*",
            "a" * rng.choice(LONG),
            "assume:" + "x" * rng.choice(LONG),
            "q:<taskId>",
        ]
        count = rng.choice([0, 1, 2, 5, 100, 3000])
        return [rng.choice(pool) + (str(i) if rng.random() < 0.5 else "") for i in range(count)]

    def mutate(self, valid: Any) -> Any:
        """A valid body with one field replaced, removed, or added, at any depth."""
        if not isinstance(valid, dict) or not valid or self.chance(0.1):
            return self.pick([(6, self.value), (1, self.big)])
        body = dict(valid)
        key = self.rng.choice(sorted(body))
        action = self.rng.random()
        if action < 0.55:
            body[key] = self.replace(body[key])
        elif action < 0.75:
            del body[key]
        else:
            body[self.text()] = self.value()
        return body

    def replace(self, old: Any) -> Any:
        """Another value for a field: mostly of its own type (a hostile string for a string, an
        edge number for a number), so that it gets past the type check to the rules behind it."""
        if isinstance(old, dict):
            return self.mutate(old)
        if isinstance(old, str) and self.chance(0.6):
            return self.text()
        if isinstance(old, int | float) and not isinstance(old, bool) and self.chance(0.6):
            return self.rng.choice(NUMBERS)
        if isinstance(old, list) and self.chance(0.6):
            items = [self.replace(x) for x in old] or [self.text()]
            return items + items if self.chance(0.2) else items  # duplicates, for unique arrays
        return self.pick([(6, self.value), (1, self.big)])

    def encode(self, body: Any) -> bytes:
        """JSON bytes, sometimes with lone surrogates sent as is (invalid UTF-8)."""
        text = json.dumps(body, ensure_ascii=self.chance(0.5))
        return text.encode("utf-8", "surrogatepass")

    def broken_json(self, valid: bytes) -> bytes:
        rng = self.rng
        return self.pick(
            [
                (3, lambda: valid[: rng.randint(0, max(0, len(valid) - 1))]),  # truncated
                (
                    1,
                    lambda: rng.choice(
                        [
                            b"",
                            b" ",
                            b"{",
                            b"[1,",
                            b"\xff\xfe\x00\x01",
                            b"\x00",
                            b"{'single': 'quotes'}",
                            b'{"a": NaN}',
                            b'{"a": Infinity}',
                            b'{"a": 1e400}',
                            b'"\\ud800"',
                            b'{"a": "\\u0000"}',
                            b'{"a": "\xff"}',
                            b'{"a": "\xed\xa0\x80"}',
                            b"[" * 5000 + b"]" * 5000,
                            b'{"a": 1, "a": 2}',
                            b"\xef\xbb\xbf{}",
                            b"null",
                            b"0",
                        ]
                    ),
                ),
                (1, lambda: self.raw_bytes(64)),
                (1, lambda: gzip.compress(valid)),
                (1, lambda: valid.replace(b'"', b"\xff", 1)),
            ]
        )

    def sized(self) -> bytes:
        """A JSON body of a size at, just under or over the body limit."""
        limit = self.body_limit
        size = self.rng.choice([limit - 1, limit, limit + 1, limit * 2])
        return b'{"description":"' + b"x" * (size - 18) + b'"}'

    # Hawk -------------------------------------------------------------------------------------

    def nonce(self) -> str:
        return "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(8))

    def hawk_header(self, mac_input: hawk.MacInput, client_id: str, key: str) -> str:
        """A valid Hawk header for `mac_input`, as TaskCluster's clients send it."""
        mac = hawk.calculate_mac("header", key, mac_input)
        attrs = {"id": client_id, "ts": mac_input.ts, "nonce": mac_input.nonce, "hash": mac_input.hash}
        attrs |= {"ext": mac_input.ext} if mac_input.ext else {}
        attrs["mac"] = mac
        return "Hawk " + ", ".join(f'{k}="{v}"' for k, v in attrs.items() if v)

    def ext(self, certificate: dict[str, Any] | None) -> str:
        """The `ext` attribute: none, the real certificate, or a mutated one, or junk."""
        rng = self.rng
        if certificate is None and self.chance(0.8):
            return ""
        content: Any = {"certificate": certificate} if certificate is not None else {}
        if self.chance(0.3):
            content = self.mutate(content)
        if isinstance(content, dict) and self.chance(0.1):
            content["authorizedScopes"] = self.pick([(1, self.value), (1, lambda: ["queue:*"])])
        if self.chance(0.05):
            return rng.choice(["x", "%%%", base64.b64encode(self.raw_bytes(30)).decode()])
        return base64.b64encode(self.encode(content)).decode()

    def mutate_header(self, header: str) -> str:
        """A valid Hawk header with one attribute changed, dropped, doubled or added, or its syntax broken."""
        rng = self.rng
        attrs = header[len("Hawk ") :].split(", ")
        i = rng.randrange(len(attrs))
        name = attrs[i].split("=", 1)[0]
        return self.pick(
            [
                (
                    4,
                    lambda: (
                        "Hawk " + ", ".join([*attrs[:i], f'{name}="{self.attribute()}"', *attrs[i + 1 :]])
                    ),
                ),
                (1, lambda: "Hawk " + ", ".join(attrs[:i] + attrs[i + 1 :])),
                (1, lambda: "Hawk " + ", ".join([*attrs, attrs[i]])),
                (1, lambda: "Hawk " + ", ".join([*attrs, f'{rng.choice(["app", "dlg", "x"])}="a"'])),
                (1, lambda: header.replace('"', "", rng.randint(1, 3))),
                (
                    1,
                    lambda: rng.choice(
                        ["Hawk", "Hawk ", "hawk " + header[5:], "Basic Zm9vOmJhcg==", "Bearer x"]
                    ),
                ),
                (1, lambda: header + "x" * rng.choice([10, 5000])),
            ]
        )

    def attribute(self) -> str:
        rng = self.rng
        return self.pick(
            [
                (3, self.number_text),
                (2, self.text),
                (1, lambda: base64.b64encode(self.raw_bytes(40)).decode()),
                (1, lambda: rng.choice(["root", "static/taskcluster/root", "nobody", "a" * 1000])),
            ]
        )
