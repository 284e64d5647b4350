"""exchanges.erlang.format is OTP 25's io_lib:format for the directives RabbitMQ's texts use.

The fixed cases are texts RabbitMQ 3.10.8 sent (the format string is its source's, the argument
what the client's bytes became); the random ones are compared with `erl` itself where one is
installed, across term shapes, start columns and line lengths.
"""

from __future__ import annotations

import ast
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from exchanges.erlang.atom import FALSE, Atom
from exchanges.erlang.format import erl_format, format_binary_p, format_term, write_atom, write_term


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _mode_error(value: bytes) -> list[int]:
    """rabbit_amqqueue's queue-mode refusal: a string (character list) made with ~s of the value."""
    return list(b"unsupported queue mode '" + value + b"'")


#: A queue-mode value -> how RabbitMQ 3.10.8 printed the refusal string (~p: text only when it is
#: printable Latin-1, else the character list).
MODE_REFUSALS = {
    b"l\xe9zy": b"\"unsupported queue mode 'l\xe9zy'\"",
    b"la\nzy": b"\"unsupported queue mode 'la\\nzy'\"",
    b"caf\xc3\xa9": b"\"unsupported queue mode 'caf\xc3\xa9'\"",
    b'a"b\\c': b'"unsupported queue mode \'a\\"b\\\\c\'"',
    b"\xa0": b"\"unsupported queue mode '\xa0'\"",
    b"\x01ab": (
        b"[117,110,115,117,112,112,111,114,116,101,100,32,113,117,101,117,101,32,109,111,100,101,32,"
        b"39,1,97,98,39]"
    ),
    b"\xe2\x82\xac": (
        b"[117,110,115,117,112,112,111,114,116,101,100,32,113,117,101,117,101,32,109,111,100,101,32,"
        b"39,226,130,172,39]"
    ),
}


@pytest.mark.parametrize(("value", "expected"), MODE_REFUSALS.items())
def test_string_argument_prints_as_text_only_when_printable_latin1(value: bytes, expected: bytes) -> None:
    prefix = "invalid arg 'x-queue-mode' for queue 'q' in vhost '/': "
    text = erl_format(
        "invalid arg '~s' for ~s: ~255p", ["x-queue-mode", "queue 'q' in vhost '/'", _mode_error(value)]
    )
    assert _wire(text) == prefix.encode() + expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"1l\xe9zy", b'{invalid_stream_offset_arg,{longstr,<<"1l\xe9zy">>}}'),
        (b"1la\nzy", b'{invalid_stream_offset_arg,{longstr,<<"1la\\nzy">>}}'),
        (b"1\x01ab", b"{invalid_stream_offset_arg,{longstr,<<49,1,97,98>>}}"),
        (b"1\x7f", b"{invalid_stream_offset_arg,{longstr,<<49,127>>}}"),
    ],
)
def test_binary_inside_a_term(value: bytes, expected: bytes) -> None:
    term = (Atom("invalid_stream_offset_arg"), (Atom("longstr"), value))
    assert _wire(format_term(term, column=60, line=255)) == expected


def test_long_non_printable_binary_wraps_under_its_first_byte() -> None:
    """The consistent-hash plugin's "The binding key must be an integer: ~p" for a 25-byte key."""
    text = erl_format("The binding key must be an integer: ~p", [b"\x01" * 25])
    assert text == (
        "The binding key must be an integer: <<1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,\n"
        + " " * 38
        + "1,1,1,1,1>>"
    )
    assert erl_format("~p", [b"\x01" * 25]) == "<<1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1>>"


def test_column_counts_from_the_last_newline_and_tabs_to_eight() -> None:
    term = (Atom("invalid_frame_end_marker"), 0)
    assert (
        erl_format("~s~p", ["x" * 60, term]) == "x" * 60 + "{invalid_frame_end_marker,\n" + " " * 60 + " 0}"
    )
    assert erl_format("~s\n~p", ["x" * 60, term]) == "x" * 60 + "\n{invalid_frame_end_marker,0}"
    assert (
        erl_format("\t~s~p", ["x" * 45, term])
        == "\t" + "x" * 45 + "{invalid_frame_end_marker,\n" + " " * 53 + " 0}"
    )


def test_w_never_prints_text_nor_wraps() -> None:
    assert write_term(b"AAAA") == "<<65,65,65,65>>"
    assert write_term([97, 98]) == "[97,98]"
    assert write_term((Atom("a b"), "é", FALSE, 1.0)) == "{'a b',[195,169],false,1.0}"
    assert (
        erl_format("cannot decode ~w", [b"\x80" * 30]) == "cannot decode <<" + ",".join(["128"] * 30) + ">>"
    )


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("longstr", "longstr"),
        ("a@b_C1", "a@b_C1"),
        ("x-consistent-hash", "'x-consistent-hash'"),
        ("Abc", "'Abc'"),
        ("end", "'end'"),
        ("it's", "'it\\'s'"),
        ("tab\there", "'tab\\there'"),
        ("\x01a", "'\\001a'"),
        ("\x7f", "'\\d'"),
        ("\x85", "'\\205'"),
        ("", "''"),
    ],
)
def test_atoms_are_quoted_as_io_lib_write_atom_does(name: str, shown: str) -> None:
    assert write_atom(name) == shown
    assert format_term(Atom(name)) == shown


def test_binary_p_and_term_agree_when_the_binary_fits() -> None:
    for value in (b"", b"abc", b"\x00\x01", "é".encode(), b"a\nb"):
        assert _wire(format_term(value)) == format_binary_p(value)


def test_directives_and_arguments_must_match() -> None:
    with pytest.raises(ValueError):
        erl_format("~p ~p", [1])
    with pytest.raises(ValueError):
        erl_format("~p", [1, 2])
    assert erl_format("100~~ ~p", [1]) == "100~ 1"
    with pytest.raises(ValueError):
        erl_format("~ts", ["a"])  # ~ts, ~tp: not needed by any text, so not emulated


# -- against erl ---------------------------------------------------------------------------------------

ESCRIPT = r"""#!/usr/bin/env escript
main([File]) ->
    {ok, Cases} = file:consult(File),
    [io:format("~w~n", [lists:flatten(io_lib:format(Fmt, Args))]) || {Fmt, Args} <- Cases].
"""

_ATOMS = ["ok", "value_negative", "invalid_frame_end_marker", "longstr", "x-consistent-hash", "Abc", "end"]


def _random_term(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return [_random_term(rng, depth + 1) for _ in range(rng.randint(0, 8))]
    if depth < 3 and roll < 0.3:
        items = [_random_term(rng, depth + 1) for _ in range(rng.randint(0, 6))]
        if items and rng.random() < 0.5:
            items[0] = Atom(rng.choice(_ATOMS))
        return tuple(items)
    if roll < 0.45:
        return rng.randint(-(10 ** rng.randint(0, 25)), 10 ** rng.randint(0, 25))
    if roll < 0.55:
        return Atom(rng.choice(_ATOMS))
    if roll < 0.6:
        return rng.random() < 0.5
    if roll < 0.85:
        alphabet = rng.choice([b"abc xyz", b'\x01\x80\xff\n"\\a', bytes(range(256))])
        return bytes(rng.choice(alphabet) for _ in range(rng.randint(0, rng.choice([5, 30, 120]))))
    if roll < 0.92:
        return [rng.randint(0, 300) for _ in range(rng.randint(0, 12))]
    return "".join(rng.choice(rng.choice(["abc xyz", 'é\n"', "\x01ab"])) for _ in range(rng.randint(1, 40)))


def _source(term: object) -> str:
    """The Erlang source text of a term, as the printer reads the Python value."""
    if isinstance(term, bool):
        return "true" if term else "false"
    if isinstance(term, int):
        return str(term)
    if isinstance(term, Atom):
        return "'" + term.name + "'"
    if isinstance(term, bytes):
        return "<<" + ",".join(map(str, term)) + ">>"
    if isinstance(term, str):
        return "[" + ",".join(map(str, term.encode())) + "]"
    if isinstance(term, list):
        return "[" + ",".join(map(_source, term)) + "]"
    assert isinstance(term, tuple)
    return "{" + ",".join(map(_source, term)) + "}"


@pytest.mark.skipif(shutil.which("escript") is None, reason="no Erlang installation to compare with")
def test_random_formats_match_erlang_io_lib(tmp_path: Path) -> None:
    rng = random.Random(5)
    cases: list[tuple[str, list[object]]] = []
    for _ in range(600):
        fmt, args = "", []
        for _ in range(rng.randint(1, 3)):
            fmt += "x" * rng.randint(0, 70) + rng.choice(["", "\n", "\t", " \t"]) + "y" * rng.randint(0, 5)
            directive = rng.choice(["~p", "~p", "~w", "~255p", "~40p", "~s"])
            fmt += directive
            args.append(rng.choice([b"ab\xe9", "queue 'q'", b""]) if directive == "~s" else _random_term(rng))
        cases.append((fmt, args))
    source = "".join(
        f"{{{_source(list(fmt.encode()))},[{','.join(map(_source, args))}]}}.\n" for fmt, args in cases
    )
    (tmp_path / "cases").write_text(source)
    (tmp_path / "fmt.escript").write_text(ESCRIPT)
    lines = subprocess.run(
        ["escript", str(tmp_path / "fmt.escript"), str(tmp_path / "cases")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    assert len(lines) == len(cases)
    for (fmt, args), line in zip(cases, lines, strict=True):
        assert _wire(erl_format(fmt, args)) == bytes(ast.literal_eval(line)), (fmt, args)
