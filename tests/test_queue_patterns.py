"""Queue patterns (jobq.domain.access.QueuePattern): shell globs on queue names, compiled to
one regular expression that Python (a queue a request names) and PostgreSQL (the queue of a
job read by id) must read alike, or a token would see different queues by route."""

from __future__ import annotations

import fnmatch
import itertools

import psycopg
import pytest

from jobq.domain.access import QueuePattern

NAMES = ["default", "a", "b", "ab", "abc", "x", "y", "z", "A", "0", "9", "-", "a.b", "axb", "a:b",
         "a-b", "a_b", "tenant-a.emails", "tenant-a:emails", "tenant-ab.emails", "tenant-b.emails",
         "emails", "emails.high", "e", "in-q", "out-q", "q1", "q12", "qa", "a.b.c", "a..b",
         "x]", "x[", "x^", "x$", "x(y)", "x|y", "x+y", "x{2}", "x\\y", "é", "日本", "c", "d", "+",
         ",", "/", ".", "\\", "]", "^", "ax", "-x", "cx"]

CASES: list[tuple[str, list[str], list[str]]] = [
    # pattern, some names it matches, some it does not
    ("*", ["default", "a", "a.b", "-"], []),
    ("default", ["default"], ["defaults", "Default", "xdefault", "d"]),
    ("a*", ["a", "ab", "a.b", "a:b"], ["b", "ba", "A"]),
    ("*b", ["b", "ab", "a.b", "a-b"], ["ba", "abc"]),
    ("a?b", ["axb", "a.b", "a:b", "a-b", "a_b"], ["ab", "a..b", "abc"]),
    ("?", ["a", "x", "0", "-", "é"], ["ab", "日本"]),
    ("q[0-9]", ["q1"], ["q12", "qa"]),
    ("q[0-9]*", ["q1", "q12"], ["qa"]),
    ("[a-c]", ["a", "b"], ["x", "A", "ab", "-"]),
    ("[!x]", ["a", "y", "-", "é"], ["x", "ab"]),
    ("[!a-c]*", ["x", "default", "0"], ["a", "abc", "b"]),
    ("[xyz]", ["x", "y", "z"], ["a", "xy"]),
    ("[a-]", ["a", "-"], ["b"]),
    ("[-a]", ["a", "-"], ["b"]),
    ("[]]", [], ["x]", "a"]),
    ("x[]]", ["x]"], ["x", "x["]),
    ("x[!]]", ["x[", "x^", "x$"], ["x]", "x"]),
    ("[", [], ["x["]),
    ("x[", ["x["], ["x"]),
    ("x[^]", ["x^"], ["x", "x$"]),
    ("x[$]", ["x$"], ["x^"]),
    ("a.b", ["a.b"], ["axb", "a:b"]),  # "." is a dot, not any character
    ("a:b", ["a:b"], ["a.b"]),
    ("a-b", ["a-b"], ["a.b"]),
    ("x(y)", ["x(y)"], ["xy"]),
    ("x|y", ["x|y"], ["x", "y"]),
    ("x+y", ["x+y"], ["xy", "xxy"]),
    ("x{2}", ["x{2}"], ["xx"]),
    ("x\\y", ["x\\y"], ["xy"]),
    ("x$", ["x$"], ["x"]),
    ("x^", ["x^"], []),
    ("tenant-a.*", ["tenant-a.emails"], ["tenant-a:emails", "tenant-ab.emails", "tenant-b.emails"]),
    ("tenant-a.*,emails", ["tenant-a.emails", "emails"], ["emails.high", "tenant-b.emails"]),
    ("emails, emails.*", ["emails", "emails.high"], ["e", "default"]),
    ("a,b,c*", ["a", "b", "c", "c1"], ["ab", "abc", "x"]),
    ("é", ["é"], ["e"]),
    ("日*", ["日本"], ["a"]),
]


@pytest.mark.parametrize(("pattern", "yes", "no"), CASES)
def test_globs_match_what_they_say(pattern: str, yes: list[str], no: list[str]) -> None:
    p = QueuePattern(pattern)
    assert [n for n in yes if not p.matches(n)] == []
    assert [n for n in no if p.matches(n)] == []


# Sets whose "-" ends no range, ranges of punctuation, escapes in sets.
MORE = ["[a-c-e]", "[--/]", "[+--]", "[a-c-]x", "[!-]", "[à-ü]", "[a\\]", "[x^]", "[!]]"]


@pytest.mark.parametrize("pattern", [c[0] for c in CASES if "," not in c[0]] + MORE)
def test_a_single_glob_matches_as_fnmatch_does(pattern: str) -> None:
    """The shell's meaning, as the standard library implements it."""
    p = QueuePattern(pattern)
    assert [n for n in NAMES if p.matches(n) != fnmatch.fnmatchcase(n, pattern)] == []


def test_the_text_is_normalized_and_compared() -> None:
    assert QueuePattern(" a , b* ").text == "a,b*"
    assert QueuePattern("a, b") == QueuePattern("a,b")
    assert QueuePattern("*").is_all and not QueuePattern("*,a").is_all
    assert QueuePattern("a").regex.startswith("^") and QueuePattern("a").regex.endswith("$")


@pytest.mark.parametrize("bad", ["", " ", ",", "a,", ",a", "a,,b", "[z-a]", "x[c-a]y"])
def test_malformed_patterns_are_value_errors(bad: str) -> None:
    """ValueError, which the API answers 422: anything else would be a 500."""
    with pytest.raises(ValueError):
        QueuePattern(bad)


def test_postgresql_reads_every_pattern_as_python_does(database_url: str) -> None:
    patterns = [c[0] for c in CASES] + MORE
    pairs = list(itertools.product(patterns, NAMES))
    with psycopg.connect(database_url) as conn:
        disagree = []
        for pattern, name in pairs:
            regex = QueuePattern(pattern).regex
            try:
                theirs = conn.execute("SELECT %s ~ %s", (name, regex)).fetchone()
            except psycopg.Error as exc:
                conn.rollback()
                disagree.append((pattern, regex, name, f"PostgreSQL: {exc}".splitlines()[0]))
                continue
            assert theirs is not None
            if theirs[0] != QueuePattern(pattern).matches(name):
                disagree.append((pattern, regex, name, theirs[0]))
    assert disagree == []
