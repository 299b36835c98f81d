"""A task log's bytes as safe HTML: ANSI colours become `<span class="ansi-...">`, nothing else.

Logs are text a task printed, so anything in them is hostile: every character is escaped, and the
only markup in the result is the spans this module writes, with classes from a fixed set (the
page's Content-Security-Policy forbids style attributes). SGR sequences set the classes: 16
foreground and background colours (30-37, 90-97, 40-47, 100-107; 256-colour and 24-bit colours
map to the nearest of the 16), bold, faint, italic, underline, and resets. Every other escape
sequence and control character is dropped; a carriage return ends a line, as it would in a `<pre>`
anyway. Invalid UTF-8 decodes to U+FFFD. The work is one pass over the text: linear in its size.

`static/task.js` converts the live log the same way in the browser, building DOM nodes with
`textContent` (so log text never becomes markup there either).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from markupsafe import Markup, escape

# One token: an escape sequence (CSI, OSC, or ESC and one character), or a run of control
# characters to drop. OSC is bounded so that a stray `ESC ]` can't swallow the rest of a log.
_TOKEN = re.compile(
    r"\x1b\[(?P<params>[0-?]*)(?P<inter>[ -/]*)(?P<final>[@-~])"  # CSI ... final byte
    r"|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)"  # OSC ... BEL or ST
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # ESC, intermediates and a final character (or a lone ESC)
    r"|\r\n?"  # CR LF or a lone CR: a line break
    r"|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]+"  # other controls (C0 but \t \n, DEL, C1)
)

# The 16 colours' RGB values (xterm's), to map 256-colour and 24-bit colours to the nearest.
_PALETTE = (
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205),
    (229, 229, 229), (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255),
    (255, 0, 255), (0, 255, 255), (255, 255, 255),
)  # fmt: skip
_CUBE = (0, 95, 135, 175, 215, 255)


@dataclass(frozen=True)
class Style:
    """The SGR attributes in force: colours as 0-15 (None: the default), and the flags."""

    fg: int | None = None
    bg: int | None = None
    bold: bool = False
    faint: bool = False
    italic: bool = False
    underline: bool = False

    @functools.cached_property
    def classes(self) -> str:
        names = [f"ansi-fg-{self.fg}"] if self.fg is not None else []
        if self.bg is not None:
            names.append(f"ansi-bg-{self.bg}")
        names += [f"ansi-{flag}" for flag in ("bold", "faint", "italic", "underline") if getattr(self, flag)]
        return " ".join(names)


PLAIN = Style()


@functools.lru_cache(maxsize=4096)
def nearest(r: int, g: int, b: int) -> int:
    """The one of the 16 colours closest to (r, g, b)."""
    return min(
        range(16), key=lambda i: sum((a - c) ** 2 for a, c in zip(_PALETTE[i], (r, g, b), strict=True))
    )


def colour_256(n: int) -> int:
    """A 256-colour index as one of the 16."""
    if n < 16:
        return n
    if n < 232:
        n -= 16
        return nearest(_CUBE[n // 36], _CUBE[n // 6 % 6], _CUBE[n % 6])
    level = 8 + (n - 232) * 10
    return nearest(level, level, level)


def _extended(codes: list[int], i: int) -> tuple[int | None, int]:
    """The colour 38/48 introduces at codes[i] (`5;n` or `2;r;g;b`), and the index after it."""
    kind = codes[i + 1] if i + 1 < len(codes) else -1
    if kind == 5 and i + 2 < len(codes):
        return (colour_256(codes[i + 2]) if codes[i + 2] < 256 else None), i + 3
    if kind == 2 and i + 4 < len(codes):
        r, g, b = (min(c, 255) for c in codes[i + 2 : i + 5])
        return nearest(r, g, b), i + 5
    return None, len(codes)  # malformed: the rest of the sequence means nothing


_FLAGS = {1: ("bold", True), 2: ("faint", True), 3: ("italic", True), 4: ("underline", True),
          23: ("italic", False), 24: ("underline", False)}  # fmt: skip


@functools.lru_cache(maxsize=4096)
def apply_sgr(style: Style, params: str) -> Style:
    """`style` after `ESC [ params m`."""
    codes = [int(p) if p.isdigit() else 0 for p in re.split("[;:]", params)] if params else [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        i += 1
        if code == 0:
            style = PLAIN
        elif code in _FLAGS:
            flag, on = _FLAGS[code]
            style = replace(style, **{flag: on})
        elif code == 22:
            style = replace(style, bold=False, faint=False)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style = replace(style, fg=code - 30 if code < 90 else code - 82)
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style = replace(style, bg=code - 40 if code < 100 else code - 92)
        elif code == 39:
            style = replace(style, fg=None)
        elif code == 49:
            style = replace(style, bg=None)
        elif code in (38, 48):
            colour, i = _extended(codes, i - 1)
            if colour is not None:
                style = replace(style, fg=colour) if code == 38 else replace(style, bg=colour)
    return style


def decode(data: bytes) -> str:
    """Log bytes as text: invalid UTF-8 becomes U+FFFD."""
    return data.decode("utf-8", errors="replace")


def to_html(text: str, style: Style = PLAIN) -> Markup:
    """`text` escaped, with its colours as spans (`style`: what is in force at its start)."""
    parts: list[str] = []
    position = 0

    def emit(end: int) -> None:
        if end > position:
            piece = str(escape(text[position:end]))
            classes = style.classes
            parts.append(f'<span class="{classes}">{piece}</span>' if classes else piece)

    for token in _TOKEN.finditer(text):
        emit(token.start())
        position = token.end()
        matched = token.group()
        if matched[0] == "\r":
            parts.append("\n")
        elif token.group("final") == "m" and not token.group("inter") and token.group("params") is not None:
            style = apply_sgr(style, token.group("params"))
    emit(len(text))
    return Markup("".join(parts))


def to_lines(text: str) -> list[tuple[Markup, str]]:
    """`text` as lines (a line feed or a carriage return ends one; the break itself is not kept),
    each as its HTML (as `to_html` makes it, the colours carried from line to line) and its plain
    text (what a search looks in). A final line break makes no empty line after it."""
    lines: list[tuple[Markup, str]] = []
    html: list[str] = []
    plain: list[str] = []
    style = PLAIN
    position = 0

    def emit(end: int) -> None:
        pieces = text[position:end].split("\n")
        for i, piece in enumerate(pieces):
            if i:
                end_line()
            if piece:
                classes = style.classes
                escaped = str(escape(piece))
                html.append(f'<span class="{classes}">{escaped}</span>' if classes else escaped)
                plain.append(piece)

    def end_line() -> None:
        lines.append((Markup("".join(html)), "".join(plain)))
        html.clear()
        plain.clear()

    for token in _TOKEN.finditer(text):
        emit(token.start())
        position = token.end()
        matched = token.group()
        if matched[0] == "\r":
            end_line()
        elif token.group("final") == "m" and not token.group("inter") and token.group("params") is not None:
            style = apply_sgr(style, token.group("params"))
    emit(len(text))
    if html or plain:
        end_line()
    return lines


def bytes_to_html(data: bytes) -> Markup:
    return to_html(decode(data))
