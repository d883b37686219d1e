"""The console text rules, as Nova's compute service and API apply them."""

from __future__ import annotations

import pytest

from openkeel_compute.compute import console

LOG = b"one\ntwo\nthree\n"


@pytest.mark.parametrize(("length", "expected"), [
    (None, b"one\ntwo\nthree\n"), (1, b""), (2, b"three\n"), (3, b"two\nthree\n"), (100, LOG), (0, b""),
    (-1, b"two\nthree\n"), (-3, b""),
])
def test_tail_takes_the_last_pieces_between_newlines(length, expected):
    assert console.tail(LOG, length) == expected
    assert console.tail(LOG.decode(), length) == expected.decode()  # the same cut on text


def test_a_longer_answer_is_cut_for_a_shorter_request_keeping_replaced_bytes():
    text = console.as_text(console.tail(b"a\nb\xc3\xa9\nc\n", 10))
    assert text == "a\nb\ufffd\ufffd\nc\n"
    assert console.cut(console.Answer(10, text, None), 3) == "b\ufffd\ufffd\nc\n"
    assert console.cut(console.Answer(3, "x\n", None), 3) == "x\n"  # the same length: as answered


def test_printable_removes_what_novas_api_removes():
    assert console.printable("a\r\n\tb\x1b[0m\x00\x7f") == "a\n\tb[0m\x7f"


@pytest.mark.parametrize(("answered", "wanted", "covers"), [
    (None, None, True), (None, 5, True), (None, -1, True), (10, 5, True), (5, 5, True), (-1, -1, True),
    (3, 0, True), (5, 10, False), (5, None, False), (5, -1, False), (-1, 5, False), (0, 5, False),
])
def test_which_answers_hold_a_request(answered, wanted, covers):
    assert console.covers(answered, wanted) is covers


def test_lengths_beyond_the_column_keep_their_meaning():
    assert console.normal_length("99999999999999999999") == 2**31 - 1
    assert console.normal_length(-(10**30)) == -(2**31 - 1)
    assert console.normal_length("7") == 7 and console.normal_length(None) is None
