"""User-supplied regular expressions, compiled and matched in time linear in the name.

RabbitMQ's policies, operator policies, permissions, topic permissions and management `use_regex`
filters all take a regex from whoever may set them, and RabbitMQ runs each with
`re:run(Name, Pattern)`: PCRE, a backtracking
engine, saved from catastrophic patterns (`^(a+)+$` against "aaa...!") only by its match limit,
which costs RabbitMQ ~1.2 s in the one Erlang process that asked. hashbroker has one event loop
for every client, so a backtracking match would stall them all. Patterns are therefore matched
with RE2, whose automata never backtrack: the cost is bounded by pattern size times name length.

Semantics follow RabbitMQ's call, not Python's `re`: the pattern and the name are both binaries
and PCRE runs without its `unicode` option, so matching is byte by byte (`.` is one byte, `\\w` is
ASCII, an "é" in a pattern is its two UTF-8 bytes). RE2 in Latin-1 mode over the UTF-8 bytes does
exactly that. The search is unanchored, as `re:run` is.

RE2 lacks the PCRE constructs that need backtracking: backreferences, lookbehind, atomic groups,
possessive quantifiers, recursion, and a few escapes (`\\Z`, `\\h`, `\\e`, `\\cX`, `\\G`, `\\K`, `\\R`).
One PCRE form is common enough in policies to be kept: a pattern that opens with `^` (or `\\A`)
and then one or more lookaheads, such as `^(?!amq\\.).*` ("everything but amq.*"). At offset 0 such
a pattern is the conjunction of its parts, each an RE2 pattern anchored there, so it is matched as
that. Anything else RE2 cannot compile but PCRE accepts is refused with `UnsupportedPattern`, whose
text names the construct: RabbitMQ would accept it (a known difference), but silently matching it
differently, or slowly, would be worse.

Two byte-level differences remain: PCRE's `$` also matches before a final newline (RE2's only at the
very end), so they differ on names ending in "\\n"; and PCRE gives up after its match limit (a name
a catastrophic pattern would match after ~10 million steps does not match on RabbitMQ, does here).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any


@functools.cache
def _engine() -> tuple[Any, Any]:
    """RE2 and its options, loaded at the first pattern that needs an engine: the defaults every
    broker starts with (`.*` and the empty pattern) do not, and RE2's library costs ~3.5 MiB of
    resident memory that an idle broker should not pay.

    The options: Latin-1 over the UTF-8 bytes (matching byte by byte, as PCRE without `unicode`);
    refusals are answers to a client, not log lines; and a memory budget per pattern (program and DFA
    caches; RE2's default is 8 MiB) of 1 MiB. That budget bounds what a user who can set many
    policies can make the broker hold, and the slowest match: an adversarial pattern over a 255-byte
    name (`(a|b)*a(a|b){999}c`, which RE2's DFA cannot cache) costs at most ~0.6-1 ms of CPU at
    1 MiB, at 8 MiB up to ~1.3 ms (measured). Patterns compiling to up to ~43,000 RE2 instructions
    fit (an alternation of 20,000 short names); a larger one is refused by name."""
    import re2

    options: Any = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False
    options.max_mem = 1 << 20
    return re2, options


class _Everything:
    """`.*`: it matches the empty string at offset 0, so it matches every name."""

    __slots__ = ()

    def search(self, text: bytes) -> bool:
        return True


class _OnlyEmpty:
    """`^$` (what an empty permission regex means): only the empty name, with RE2's `$`."""

    __slots__ = ()

    def search(self, text: bytes) -> bool | None:
        return True if not text else None


_WITHOUT_ENGINE: dict[bytes, Any] = {b".*": _Everything(), b"^$": _OnlyEmpty()}


class PatternError(ValueError):
    """A pattern PCRE would refuse too: `reason` and `offset` shaped as `re:compile`'s
    `{error, {Reason, Offset}}` (the offset is 0-based, as PCRE reports it)."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} at offset {offset}")
        self.reason = reason
        self.offset = offset


class UnsupportedPattern(PatternError):
    """A pattern PCRE accepts that cannot be matched in bounded time here (see the module doc)."""


def _text(value: str) -> bytes:
    """The bytes RabbitMQ holds for a name or pattern (names that are not UTF-8 arrive as surrogates)."""
    return value.encode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True, eq=False)
class UserPattern:
    """A compiled user pattern: `search(name)` is `re:run(Name, Pattern) =/= nomatch`."""

    source: str
    _required: tuple[Any, ...]
    _forbidden: tuple[Any, ...]

    def search(self, name: str) -> bool:
        text = _text(name)
        for regexp in self._required:
            if regexp.search(text) is None:
                return False
        return all(regexp.search(text) is None for regexp in self._forbidden)


def never_matching(source: str) -> UserPattern:
    """A stand-in for a stored pattern this broker cannot run (saved by an older version, or by
    RabbitMQ): it matches nothing, so a permission fails closed instead of failing the boot."""
    return UserPattern(source, (), (_WITHOUT_ENGINE[b".*"],))


def compile_user_pattern(source: str) -> UserPattern:
    """Compile `source` as RabbitMQ would; PatternError for what PCRE refuses, UnsupportedPattern
    for what only a backtracking engine could run."""
    raw = _text(source)
    if raw in _WITHOUT_ENGINE:
        return UserPattern(source, (_WITHOUT_ENGINE[raw],), ())
    re2, options = _engine()
    try:
        return UserPattern(source, (re2.compile(raw, options),), ())
    except re2.error as exc:
        refusal = exc
    split = _leading_lookaheads(source)
    if split is not None:
        parts = _compile_parts(split)
        if parts is not None:
            return UserPattern(source, *parts)
    _raise_pcre_syntax_error(source)
    raise _unsupported(source, refusal)


# --- the "^(?!X)(?=Y)REST" form ---------------------------------------------------------------------

_ANCHORS = ("^", "\\A")
_EXTENDED_FLAG = re.compile(r"\(\?[a-zA-Z]*x")


def _leading_lookaheads(source: str) -> tuple[list[tuple[bool, str]], str] | None:
    """([(negative, body), ...], rest) when `source` is an anchor, lookaheads, then a rest with no
    top-level alternative; None otherwise. Extended mode (`(?x)`, where `#` starts a comment that may
    hold any bracket) is left alone rather than scanned."""
    anchor = next((a for a in _ANCHORS if source.startswith(a)), None)
    if anchor is None or _EXTENDED_FLAG.search(source):
        return None
    pos = len(anchor)
    looks: list[tuple[bool, str]] = []
    while source.startswith(("(?=", "(?!"), pos):
        end = _group_end(source, pos)
        if end is None:
            return None
        looks.append((source[pos + 2] == "!", source[pos + 3 : end]))
        pos = end + 1
    rest = source[pos:]
    if not looks or _has_top_level_bar(rest):
        return None
    return looks, rest


def _compile_parts(
    split: tuple[list[tuple[bool, str]], str],
) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """Each part anchored at offset 0, where the leading `^` pins the whole match."""
    looks, rest = split
    required: list[Any] = []
    forbidden: list[Any] = []
    re2, options = _engine()
    try:
        for negative, body in looks:
            (forbidden if negative else required).append(re2.compile(b"\\A(?:" + _text(body) + b")", options))
        required.append(re2.compile(b"\\A(?:" + _text(rest) + b")", options))
    except re2.error:
        return None
    return tuple(required), tuple(forbidden)


def _tokens(source: str, start: int) -> Any:
    """(position, token) from `start` on, with escapes, `\\Q...\\E` and character classes (POSIX
    `[:name:]` included) each yielded as one opaque token, so only real brackets and bars stand out."""
    i, n = start, len(source)
    while i < n:
        ch = source[i]
        if ch == "\\":
            if source.startswith("\\Q", i):
                close = source.find("\\E", i + 2)
                j = n if close < 0 else close + 2
            else:
                j = i + 2
            yield i, source[i:j]
            i = j
        elif ch == "[":
            j = i + 1
            if source.startswith("^", j):
                j += 1
            if source.startswith("]", j):
                j += 1
            while j < n and source[j] != "]":
                if source[j] == "\\":
                    j += 2
                elif source.startswith("[:", j) and (close := source.find(":]", j + 2)) >= 0:
                    j = close + 2
                else:
                    j += 1
            yield i, source[i : j + 1]
            i = j + 1
        elif source.startswith("(?#", i):
            close = source.find(")", i)
            j = n if close < 0 else close + 1
            yield i, source[i:j]
            i = j
        else:
            yield i, ch
            i += 1


def _group_end(source: str, start: int) -> int | None:
    """Index of the `)` closing the group that opens at `start`."""
    depth = 0
    for pos, token in _tokens(source, start):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth == 0:
                return pos
    return None


def _has_top_level_bar(source: str) -> bool:
    depth = 0
    for _pos, token in _tokens(source, 0):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif token == "|" and depth <= 0:
            return True
    return False


# --- refusals ----------------------------------------------------------------------------------------

_PCRE_REASONS = {
    # Python's `re` message -> PCRE's, for the syntax errors both engines see
    "missing ), unterminated subpattern": "missing )",
    "unbalanced parenthesis": "unmatched parentheses",
    "unterminated character set": "missing terminating ] for character class",
    "nothing to repeat": "nothing to repeat",
    "multiple repeat": "nothing to repeat",
    "min repeat greater than max repeat": "numbers out of order in {} quantifier",
    "the repetition number is too large": "number too big in {} quantifier",
    "look-behind requires fixed-width pattern": "lookbehind assertion is not fixed length",
    "invalid group reference": "reference to non-existent subpattern",
    "unknown group name": "reference to non-existent subpattern",
}
"""Only these count as syntax errors: Python's other complaints (`\\h`, `(?|`, ...) are about syntax
PCRE accepts, so they fall through to the unsupported-construct refusal."""
_AT_END = frozenset({"missing )", "missing terminating ] for character class"})


def _raise_pcre_syntax_error(source: str) -> None:
    """Raise PatternError if `source` is not a regular expression at all.

    There is no PCRE here; Python's `re` parses the same Perl syntax and is only asked for syntax
    (never to match), so its verdict stands in, with PCRE's wording and offset where they are known.
    """
    try:
        re.compile(source)
    except re.error as exc:
        reason = _PCRE_REASONS.get(re.sub(r" [0-9]+$| '.*'$", "", exc.msg))
        pos = exc.pos
        if reason is None or (pos is not None and source.startswith("(*", pos - 1)):
            return  # PCRE syntax Python lacks, such as the (*UTF8) verbs: not an error there
        if reason in _AT_END or pos is None:
            offset = len(source)
        elif reason == "numbers out of order in {} quantifier":
            close = source.find("}", pos)
            offset = close if close >= 0 else pos
        elif reason == "reference to non-existent subpattern":
            digits = re.match(r"[0-9]*", source[pos:])
            close = source.find(")", pos)
            offset = pos + len(digits.group()) if digits and digits.group() else max(close, pos)
        else:
            offset = pos
        raise PatternError(reason, offset) from None
    except (OverflowError, RecursionError):
        raise PatternError("regular expression is too large", len(source)) from None
    for quantifier in _QUANTIFIER.finditer(source):
        if max(int(count) for count in quantifier.groups() if count) > 65535:
            raise PatternError("number too big in {} quantifier", quantifier.end() - 1)


_QUANTIFIER = re.compile(r"(?<!\\)\{([0-9]+)(?:,([0-9]*))?\}")
"""A `{n}`, `{n,}` or `{n,m}` quantifier; PCRE refuses counts above 65535."""


_RE2_CONSTRUCTS = (
    # (start of RE2's complaint, the fragments it may quote, what to call them)
    ("invalid perl operator: ", ("(?<=", "(?<!"), "lookbehind assertion"),
    ("invalid perl operator: ", ("(?=", "(?!"), "lookahead assertion (other than right after a leading ^)"),
    ("invalid perl operator: ", ("(?>",), "atomic group"),
    ("invalid perl operator: ", ("(?|",), "branch reset group"),
    ("invalid perl operator: ", ("(?#",), "comment group"),
    ("bad repetition operator: ", ("*+", "++", "?+", "}+"), "possessive quantifier"),
    ("invalid repetition size: ", ("",), "repetition count above 1000"),
    ("pattern too large", ("",), "a pattern this large (over RE2's memory budget per pattern)"),
)


def _unsupported(source: str, exc: Exception) -> UnsupportedPattern:
    message = exc.args[0] if exc.args else b""
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    reason = text
    for prefix, fragments, what in _RE2_CONSTRUCTS:
        if text.startswith(prefix) and text[len(prefix) :].startswith(fragments):
            reason = what
            break
    else:
        if text.startswith("no argument for repetition operator: *") and "(*" in source:
            reason, text = "(*VERB) option", ": (*"
        elif text.startswith("invalid escape sequence: \\") and text[26:27].isdigit():
            reason = "backreference"
        elif text.startswith(("invalid escape sequence: ", "invalid perl operator: ")):
            reason = text.split(": ", 1)[1]
    quoted = text.split(": ", 1)[1] if ": " in text else ""
    offset = source.find(quoted) if quoted else -1
    return UnsupportedPattern(
        f"{reason} is not supported: hashbroker matches patterns with RE2, in linear time",
        max(offset, 0),
    )
