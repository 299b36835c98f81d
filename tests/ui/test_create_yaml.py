"""The create form's YAML, on both databases: whatever text is posted, the answer is the task
(303) or the form again with a 4xx naming where and what the problem is, never a 500. Explicit
tags whose value their constructor cannot read (`!!int abc`, `!!bool maybe`, `!!timestamp
99999-01-01`) were 500s; a fuzz of generated documents keeps every other corner honest."""

from __future__ import annotations

import html
import random

import pytest

from taskyard.model import slugid
from taskyard.model.errors import InputError
from taskyard.ui import create
from tests.api.conftest import TASK_QUEUE_ID, Api
from tests.ui.conftest import Browser

VALID = create.EXAMPLE.replace("local/default", TASK_QUEUE_ID)


async def post(browser: Browser, text: str) -> tuple[int, str]:
    answer = await browser.post(
        "/tasks/create", {"csrf": await browser.csrf(), "taskId": slugid.nice(), "definition": text}
    )
    return answer.status_code, html.unescape(answer.text)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("!!int abc", "line 5, column 9: the value 'abc' is not a valid !!int"),
        ("!!timestamp 99999-01-01", "line 5, column 9: the value '99999-01-01' is not a valid !!timestamp"),
        ("!!timestamp 2026-13-45", "line 5, column 9: the value '2026-13-45' is not a valid !!timestamp"),
        ("!!bool maybe", "line 5, column 9: the value 'maybe' is not a valid !!bool"),
        ("!!float x", "line 5, column 9: the value 'x' is not a valid !!float"),
        ("!!int 0x", "line 5, column 9: the value '0x' is not a valid !!int"),
        ("!!int", "line 5, column 9: the value is not a valid !!int"),
        ("!!binary 'a'", "line 5, column 9: failed to decode base64 data"),
        ("!foo bar", "line 5, column 9: could not determine a constructor for the tag '!foo'"),
        ("!!python/object/apply:os.system [ls]", "line 5, column 9: could not determine a constructor"),
        ("!!set [1]", "line 5, column 9: a !!set is not a JSON value"),
        ("!!set {a}", "line 5, column 9: a !!set is not a JSON value (write it as a string)"),
        ("!!timestamp 2026-01-01", "line 5, column 9: a !!timestamp is not a JSON value"),
        ("!!binary aGk=", "line 5, column 9: a !!binary is not a JSON value"),
        ("!!omap [a: 1]", "definition.metadata.name[0]: a tuple is not a JSON value"),
        ('"\\ud800"', "definition.metadata.name: holds a lone UTF-16 surrogate"),
        ("!!int 99999999999999999999999", "definition.metadata.name: must be a whole number"),
    ],
)
async def test_an_explicit_tag_that_cannot_be_read_is_a_400_naming_the_line(
    api: Api, root_browser: Browser, value: str, says: str
) -> None:
    text = VALID.replace("name: hello", f"name: {value}")
    status, page = await post(root_browser, text)
    assert status == 400, page
    assert says in page, page
    assert text in page  # the text is shown again as it was sent


async def test_a_value_deep_in_the_payload_is_named_by_its_own_line(root_browser: Browser) -> None:
    text = VALID.replace("maxRunTime: 600", "maxRunTime: 600\n  env:\n    A: [1, !!bool perhaps]")
    status, page = await post(root_browser, text)
    assert (status, "line 14, column 12: the value 'perhaps' is not a valid !!bool" in page) == (400, True)


# A fuzz: documents from a small grammar of mappings, lists and scalars, tagged at random -------

TAGS = ["", "", "", "!!int ", "!!float ", "!!bool ", "!!null ", "!!str ", "!!timestamp ", "!!binary "]
TAGS += ["!!set ", "!!omap ", "!!pairs ", "!!map ", "!!seq ", "!foo ", "!!python/name:os.system ", "!<x> "]
SCALARS = ["abc", "maybe", "99999-01-01", "2026-01-01", "2026-13-45", "0x", "0o8", "-0b", "1_0", ".nan"]
SCALARS += ["1e999", "99999999999999999999999", "yes", "~", "'q'", '"\\x00"', "###", "aGk=", "-.inf", "''"]
SCALARS += ['"\\ud800"', "2001-12-14t21:59:43.10-99:00", "!", "0b2", "1:2:3"]


def document(rng: random.Random, depth: int = 0) -> str:
    """A YAML value in flow style: a tagged scalar, list or mapping."""
    tag = rng.choice(TAGS)
    kind = rng.random() if depth < 3 else 0.0
    if kind < 0.6:
        return tag + rng.choice(SCALARS)
    if kind < 0.8:
        return tag + "[" + ", ".join(document(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    pairs = (f"{rng.choice(SCALARS)}: {document(rng, depth + 1)}" for _ in range(rng.randint(0, 3)))
    return tag + "{" + ", ".join(pairs) + "}"


def documents(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        where = rng.choice(["name: hello", "maxRunTime: 600", "taskQueueId: " + TASK_QUEUE_ID])
        key = where.split(":")[0]
        made.append(VALID.replace(where, f"{key}: {document(rng)}"))
    return made


def test_no_generated_document_escapes_as_anything_but_an_input_error() -> None:
    """parse_definition on 3,000 generated documents: a definition, or InputError, nothing else."""
    refused = 0
    for text in documents(3000, seed=5):
        try:
            create.parse_definition(text)
        except InputError as exc:
            refused += 1
            assert exc.message.startswith("definition"), exc.message
    assert 0 < refused < 3000  # the grammar makes both


async def test_no_generated_document_answers_a_500(api: Api, root_browser: Browser) -> None:
    """The form posted with 150 generated documents: 303 (created) or a 4xx page, never a 500."""
    statuses = set()
    for text in documents(150, seed=7):
        status, page = await post(root_browser, text)
        assert status in (303, 400), (status, text, page[-2000:])
        statuses.add(status)
    assert statuses == {303, 400}
