"""ui/ansi.py: a log's colours become class spans; everything else is escaped or dropped."""

from __future__ import annotations

import re
import time

from taskyard.ui import ansi


def test_sgr_colours_become_classes_and_reset_ends_them() -> None:
    html = ansi.to_html("a \x1b[31mred\x1b[0m b \x1b[1;92mbold green\x1b[m c\n")
    assert html == (
        'a <span class="ansi-fg-1">red</span> b <span class="ansi-fg-10 ansi-bold">bold green</span> c\n'
    )


def test_backgrounds_flags_and_their_resets() -> None:
    html = ansi.to_html("\x1b[44;4mx\x1b[24my\x1b[49mz\x1b[3;2mw\x1b[22;23mv")
    assert html == (
        '<span class="ansi-bg-4 ansi-underline">x</span><span class="ansi-bg-4">y</span>z'
        '<span class="ansi-faint ansi-italic">w</span>v'
    )
    assert ansi.to_html("\x1b[103mq\x1b[39;49mr") == '<span class="ansi-bg-11">q</span>r'


def test_256_and_24_bit_colours_map_to_the_nearest_of_16() -> None:
    assert ansi.to_html("\x1b[38;5;196mx") == '<span class="ansi-fg-9">x</span>'  # bright red
    assert ansi.to_html("\x1b[38;5;2mx") == '<span class="ansi-fg-2">x</span>'
    assert ansi.to_html("\x1b[48;2;0;0;230mx") == '<span class="ansi-bg-4">x</span>'
    assert ansi.to_html("\x1b[38;5;232mx") == '<span class="ansi-fg-0">x</span>'  # near black
    assert ansi.to_html("\x1b[38;5mx\x1b[38;2;1mx") == "xx"  # malformed: no colour


def test_other_escape_sequences_and_controls_are_dropped() -> None:
    text = "\x1b[2J\x1b[?25lclear\x1b]0;title\x07ed\x1b(B \x00\x07\x08bell\x1b[K\x9b\x7f\x1b"
    assert ansi.to_html(text) == "cleared bell"
    assert ansi.to_html("tab\there\r\nnext\rover") == "tab\there\nnext\nover"


def test_everything_is_escaped() -> None:
    html = ansi.to_html('<script>alert("x")</script> & \x1b[31m<img src=x onerror=alert(1)>\x1b[0m')
    assert "<script" not in html and "<img" not in html
    assert html.startswith("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; ")
    assert re.findall(r"<(\w+)", html) == ["span"]


def test_class_names_come_from_a_fixed_set_whatever_the_parameters() -> None:
    html = ansi.to_html('\x1b[38;5;999;"onclick=x;31mA\x1b[38;2;900;-1;"><b>mB')
    assert set(re.findall(r'class="([^"]*)"', html)) <= {"ansi-fg-1"}
    assert "<b>" not in html


def test_invalid_utf8_decodes_with_replacement_characters() -> None:
    html = ansi.bytes_to_html(b"ok \xff\xfe \xc3( caf\xc3\xa9 \x1b[32m\xe2\x82m\n")
    assert html == 'ok \ufffd\ufffd \ufffd( café <span class="ansi-fg-2">\ufffdm\n</span>'


def test_an_unterminated_osc_does_not_swallow_the_log() -> None:
    html = ansi.to_html("\x1b]0;" + "x" * 10_000 + "\nrest")
    assert html.endswith("\nrest") and len(html) > 10_000


def test_huge_input_is_linear() -> None:
    """Ten times the input takes about ten times as long (generous bounds: the machine is noisy).
    Measured in this thread's CPU time: the wall clock counts the time other processes (the
    suite's other test processes) hold the CPU, which made the ratio 51 once."""

    def cost(n: int) -> float:
        chunk = "line \x1b[31mred\x1b[0m <b> \x1b[38;5;100mx\x1b]0;t\x07 \x1b[" + "1;" * 5
        text = chunk * n
        start = time.thread_time()
        ansi.to_html(text)
        return time.thread_time() - start

    small = min(cost(500) for _ in range(3))
    large = min(cost(5_000) for _ in range(3))
    assert large < small * 40, (small, large)
    assert len(ansi.to_html("\x1b[" * 200_000)) < 10  # pathological: nothing to show, and quick
