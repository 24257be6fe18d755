"""`json_input`: untrusted JSON within the documented limits, every problem at its JSON path."""

from __future__ import annotations

import sys

import pytest

from harmony_responses.json_input import MAX_JSON_DEPTH, JSONInputError, check_json_value, format_path, load_json


def _nested(levels: int) -> str:
    return '{"k": [0, ' * levels + "1" + "]}" * levels


def _expected_path(depth: int) -> str:
    # Each level is an object and an array: the container at depth MAX+1 sits under MAX parts.
    parts: list[int | str] = []
    while len(parts) < MAX_JSON_DEPTH:
        parts += ["k", 1]
    return format_path("$", parts[:MAX_JSON_DEPTH])


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH // 2 + 1, 200, sys.getrecursionlimit() * 2])
def test_too_deep_names_the_same_path_whichever_way_it_is_found(levels: int) -> None:
    with pytest.raises(JSONInputError) as caught:
        load_json(_nested(levels))
    assert caught.value.path == _expected_path(levels)
    assert f"deeper than {MAX_JSON_DEPTH}" in caught.value.reason


def test_the_limit_itself_loads() -> None:
    assert load_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    with pytest.raises(JSONInputError):
        load_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))


@pytest.mark.parametrize(
    ("text", "path", "reason"),
    [
        ('{"a": ["x", "\\udfff"]}', "$.a[1]", "lone surrogate"),
        ('{"\\ud800": 1}', '$["\\ud800"]', "lone surrogate"),
        ('{"odd key": [NaN]}', '$["odd key"][0]', "expected a finite number, found NaN"),
        ("[-Infinity]", "$[0]", "found -Infinity"),
        ("1" * 5000, "$", "not valid JSON"),
        ("[1,", "$", "not valid JSON"),
    ],
)
def test_problems_name_their_path(text: str, path: str, reason: str) -> None:
    with pytest.raises(JSONInputError) as caught:
        load_json(text)
    assert (caught.value.path, reason in caught.value.reason) == (path, True), caught.value
    str(caught.value).encode("utf-8")  # printable


def test_a_valid_surrogate_pair_is_fine_and_a_bom_is_refused() -> None:
    assert load_json('["\\ud83d\\ude00"]') == ["\U0001f600"]
    with pytest.raises(JSONInputError, match="not valid JSON"):
        load_json('\ufeff["x"]')


def test_python_values_are_held_to_the_same_rules() -> None:
    check_json_value({"a": [1.5, "ok", None, True]})
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(JSONInputError, match="deeper than"):
        check_json_value(cyclic)
    with pytest.raises(JSONInputError, match=r"^x\.a: expected a finite number"):
        check_json_value({"a": float("inf")}, "x")
    with pytest.raises(JSONInputError, match="not a string"):
        check_json_value({1: "a"})
    assert format_path("", ["input", 0, "role"]) == "input[0].role"


def test_the_text_rules_are_what_the_python_runtime_relies_on() -> None:
    """format.json's text_rules: Python's own white space (`str.isspace`, `str.strip`, `\\s`) and integer limit are
    the spec's, so the Python runtime may use them while other languages read the spec's class and number."""
    import re

    from harmony_responses._tables import spec

    ranges = spec.WHITESPACE_RANGES
    in_class = {c for first, last in ranges for c in range(first, last + 1)}
    assert {c for c in range(0x110000) if chr(c).isspace()} == in_class
    assert {c for c in range(0x110000) if re.fullmatch(r"\s", chr(c))} == in_class
    assert sys.get_int_max_str_digits() == spec.JSON_MAX_INTEGER_DIGITS
    assert load_json("1" * spec.JSON_MAX_INTEGER_DIGITS) == int("1" * spec.JSON_MAX_INTEGER_DIGITS)
    with pytest.raises(JSONInputError, match=spec.JSON_SYNTAX_ERROR):
        load_json("1" * (spec.JSON_MAX_INTEGER_DIGITS + 1))
