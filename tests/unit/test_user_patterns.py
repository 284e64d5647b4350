"""User patterns (broker.entities.patterns) answer as `re:run(Name, Pattern)` on binaries does.

PCRE without its `unicode` option matches byte by byte; Python's `re` over bytes does the same for
the syntax both share, so it is the oracle here (on short names, where backtracking is harmless).
The one known difference, `$` before a final newline, is left out of the names. Observations from
RabbitMQ 3.10.8 pin the byte semantics and which patterns PCRE refuses, with its text and offset.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.entities.patterns import PatternError, UnsupportedPattern, compile_user_pattern
from broker.entities.policy import PolicyError, compile_pattern

ATOMS = ["a", "b", "é", r"\.", ".", "[ab]", "[^a]", r"\w", r"\d", "1", "(?i:A)"]
QUANTIFIERS = ["", "", "*", "+", "?", "{1,2}", "*?"]


@st.composite
def patterns(draw: st.DrawFn, depth: int = 0) -> str:
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.booleans()):
            inner = draw(patterns(depth + 1))  # type: ignore[call-arg]
            if draw(st.booleans()):
                inner += "|" + draw(patterns(depth + 1))  # type: ignore[call-arg]
            # a group takes only bounded quantifiers: nested unbounded ones would make the oracle
            # (a backtracking engine) exponential
            pieces.append(f"({inner})" + draw(st.sampled_from(["", "?", "{1,2}"])))
            continue
        atom = draw(st.sampled_from(ATOMS))
        quantifier = draw(st.sampled_from(QUANTIFIERS))
        pieces.append(atom + quantifier)
    return "".join(pieces)


names = st.text(alphabet="ab1.é\nA", max_size=10).filter(lambda n: not n.endswith("\n"))


def pcre_like(pattern: str, name: str) -> bool:
    return re.search(pattern.encode(), name.encode()) is not None


@settings(max_examples=400, deadline=None)
@given(patterns(), st.sampled_from(["", "^"]), st.sampled_from(["", "$"]), st.lists(names, max_size=8))
def test_search_is_bytewise_like_pcre(body: str, start: str, end: str, subjects: list[str]) -> None:
    pattern = start + body + end
    compiled = compile_user_pattern(pattern)
    for name in subjects:
        assert compiled.search(name) == pcre_like(pattern, name), (pattern, name)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["=", "!"]), patterns()), min_size=1, max_size=3),
    patterns(),
    st.lists(names, max_size=8),
)
def test_leading_lookaheads_match_as_pcre_does(
    looks: list[tuple[str, str]], rest: str, subjects: list[str]
) -> None:
    pattern = "^" + "".join(f"(?{kind}{body})" for kind, body in looks) + rest
    compiled = compile_user_pattern(pattern)
    for name in subjects:
        assert compiled.search(name) == pcre_like(pattern, name), (pattern, name)


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        # observed on RabbitMQ 3.10.8: a policy with the pattern applied to a queue with the name
        ("^abc$", "abc", True),
        ("^.$", "é", False),
        ("^..$", "é", True),
        ("^é+$", "éé", False),
        (r"^\w+$", "é", False),
        ("(?i)^É$", "é", False),
        ("^[é]$", "é", False),
        (r"^\x{e9}$", "é", False),
        (r"^\xc3\xa9$", "é", True),
        (r"^(?!amq\.).*", "amq.gen-1", False),
        (r"^(?!amq\.).*", "orders", True),
    ],
)
def test_byte_semantics_observed_on_rabbitmq(pattern: str, name: str, matches: bool) -> None:
    assert compile_user_pattern(pattern).search(name) is matches


@pytest.mark.parametrize(
    ("pattern", "reason", "offset"),
    [
        # RabbitMQ 3.10.8's answers to PUT /api/policies with these patterns
        ("(", "missing )", 1),
        ("^hb(", "missing )", 4),
        ("a)", "unmatched parentheses", 1),
        ("[", "missing terminating ] for character class", 1),
        ("*", "nothing to repeat", 0),
        ("a{3,2}", "numbers out of order in {} quantifier", 5),
        ("(?P=n)", "reference to non-existent subpattern", 5),
        (r"\1", "reference to non-existent subpattern", 2),
        ("a{65536}", "number too big in {} quantifier", 7),
    ],
)
def test_syntax_errors_as_pcre_reports_them(pattern: str, reason: str, offset: int) -> None:
    with pytest.raises(PatternError) as caught:
        compile_user_pattern(pattern)
    assert not isinstance(caught.value, UnsupportedPattern)
    assert (caught.value.reason, caught.value.offset) == (reason, offset)


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", "backreference"),
        ("(?<=a)b", "lookbehind"),
        ("(?<!a)b", "lookbehind"),
        ("a(?=b)", "lookahead"),
        (r"^(?!a)b|c", "lookahead"),
        ("a*+", "possessive"),
        ("(?>a)", "atomic group"),
        ("a{1001}", "repetition count"),
        ("(*UTF8)a", "VERB"),
        (r"\Z", r"\Z"),
        ("|".join(f"a{i}x" for i in range(30000)), "this large"),
    ],
    ids=lambda v: v if len(v) < 30 else v[:20] + "...",
)
def test_constructs_pcre_accepts_but_re2_lacks_are_refused_by_name(pattern: str, named: str) -> None:
    """RabbitMQ accepts all of these (observed); refusing them is a documented difference."""
    with pytest.raises(UnsupportedPattern) as caught:
        compile_user_pattern(pattern)
    assert named in caught.value.reason


def test_catastrophic_pattern_is_linear() -> None:
    compiled = compile_user_pattern("^(a+)+$")
    start = time.perf_counter()
    assert not compiled.search("a" * 5000 + "!")
    assert compiled.search("a" * 5000)
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        # RabbitMQ 3.10.8's reason lines (PUT /api/policies), ~p's line break included
        ("*", 'pattern should be regular expression but is invalid: {"nothing to repeat",0}'),
        (
            "a)",
            'pattern should be regular expression but is invalid: {"unmatched parentheses",\n'
            + " " * 54
            + "1}",
        ),
    ],
)
def test_policy_refusal_text_is_rabbitmqs(pattern: str, text: str) -> None:
    with pytest.raises(PolicyError) as caught:
        compile_pattern(pattern)
    assert caught.value.message == text
