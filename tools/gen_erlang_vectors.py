"""Generate ``tests/data/erlang_vectors.json``: reference values computed by the real Erlang VM.

Run from the repository root::

    .venv/bin/python tools/gen_erlang_vectors.py            # (re)write the file
    .venv/bin/python tools/gen_erlang_vectors.py --check    # exit 1 if the file is stale

Why this exists: hashbroker re-implements, in Python, the pieces of Erlang that RabbitMQ 3.10.8's
x-consistent-hash exchange relies on (``erlang:phash2/1,2``, ``rand``'s exs1024 generator, the jump
consistent hash, and ``io_lib:format`` of binaries used in error texts).  Reading the C/Erlang
sources is not enough to get those bit-exact, so the tests compare against values produced by
``erl`` itself (Erlang/OTP 25 here).

How: every input term is described in Python with a small tagged JSON encoding (see ``TERM_DOC``),
turned into Erlang external term format (ETF) bytes by this script, and handed to an escript that
``binary_to_term``s it, computes everything and prints one result line made only of integers and
lists (so it is valid JSON).  The escript also re-encodes every term with ``term_to_binary`` and
this script insists the bytes are identical, which proves the JSON encoding names the very term
Erlang hashed.  When the consistent-hash plugin's beam is installed, the escript additionally
recompiles that module from its debug info (in memory only, with ``export_all``) and checks our
jump-consistent-hash results against the plugin's own unexported ``jump_consistent_hash/2``.

Only the standard library is used.  Output is deterministic: random inputs come from a fixed seed.
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "tests" / "data" / "erlang_vectors.json"
PLUGIN_EBIN_GLOB = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_consistent_hash_exchange-*/ebin"
RANDOM_SEED = 20221108  # fixed, so "random" vectors are the same on every run

Term = dict[str, Any]
"""A term in the tagged JSON encoding (see TERM_DOC)."""

TERM_DOC = {
    "bin": '{"bin": "<hex>"}: a binary (lower-case hex of its bytes, "" for <<>>).',
    "int": '{"int": "<decimal>"}: an integer of any size, as a decimal string (bignums survive JSON).',
    "float": '{"float": "<16 hex digits>"}: a float given by its IEEE-754 binary64 bit pattern '
    '(big-endian hex, e.g. "8000000000000000" is -0.0); decode with struct.unpack(">d", bytes.fromhex(h)).',
    "atom": '{"atom": "<text>"}: an atom (its name as a JSON string; Unicode allowed).',
    "list": '{"list": [t, ...]}: a proper list; {"list": [t, ...], "tail": t}: an improper list '
    '[t, ... | tail]. A charlist such as "abc" is simply {"list": [{"int": "97"}, ...]}.',
    "tuple": '{"tuple": [t, ...]}: a tuple.',
}


# --------------------------------------------------------------------------------------------
# Term constructors (the tagged JSON encoding) and the ETF encoder
# --------------------------------------------------------------------------------------------


def b(data: bytes | str) -> Term:
    """A binary; ``str`` is encoded as UTF-8 (like ``<<"..."/utf8>>``)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return {"bin": raw.hex()}


def i(value: int) -> Term:
    """An integer (kept as a decimal string so JSON readers never round it)."""
    return {"int": str(value)}


def f(value: float) -> Term:
    """A float, stored as its exact IEEE-754 bit pattern."""
    return {"float": struct.pack(">d", value).hex()}


def a(name: str) -> Term:
    """An atom."""
    return {"atom": name}


def lst(*items: Term, tail: Term | None = None) -> Term:
    """A list, improper when ``tail`` is given."""
    term: Term = {"list": list(items)}
    if tail is not None:
        term["tail"] = tail
    return term


def tup(*items: Term) -> Term:
    """A tuple."""
    return {"tuple": list(items)}


def charlist(text: str) -> Term:
    """An Erlang string literal: a list of code points."""
    return lst(*(i(ord(ch)) for ch in text))


def etf(term: Term) -> bytes:
    """Encode ``term`` exactly as OTP 25 ``term_to_binary(T, [{minor_version, 2}])`` does.

    Being byte-identical (checked by the escript) is what proves the JSON encoding is faithful.
    """
    return b"\x83" + _etf_body(term)


def _etf_int(value: int) -> bytes:
    if 0 <= value <= 255:
        return bytes([97, value])
    if -(2**31) <= value < 2**31:
        return b"\x62" + struct.pack(">i", value)
    magnitude = abs(value)
    digits = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "little")
    sign = 1 if value < 0 else 0
    if len(digits) < 256:
        return bytes([110, len(digits), sign]) + digits
    return b"\x6f" + struct.pack(">I", len(digits)) + bytes([sign]) + digits


def _etf_body(term: Term) -> bytes:
    if "bin" in term:
        raw = bytes.fromhex(term["bin"])
        return b"\x6d" + struct.pack(">I", len(raw)) + raw
    if "int" in term:
        return _etf_int(int(term["int"]))
    if "float" in term:
        return b"\x46" + bytes.fromhex(term["float"])
    if "atom" in term:
        name: bytes = term["atom"].encode("utf-8")
        if len(name) < 256:
            return bytes([119, len(name)]) + name
        return b"\x76" + struct.pack(">H", len(name)) + name
    if "tuple" in term:
        items = term["tuple"]
        head = bytes([104, len(items)]) if len(items) < 256 else b"\x69" + struct.pack(">I", len(items))
        return head + b"".join(_etf_body(x) for x in items)
    if "list" in term:
        items = term["list"]
        tail = term.get("tail")
        if not items and tail is None:
            return b"\x6a"
        if tail is None and len(items) <= 65535 and all(_is_byte(x) for x in items):
            return b"\x6b" + struct.pack(">H", len(items)) + bytes(int(x["int"]) for x in items)
        body = b"".join(_etf_body(x) for x in items)
        return b"\x6c" + struct.pack(">I", len(items)) + body + _etf_body(tail or lst())
    raise ValueError(f"not a tagged term: {term!r}")


def _is_byte(term: Term) -> bool:
    return "int" in term and 0 <= int(term["int"]) <= 255


# --------------------------------------------------------------------------------------------
# The inputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One phash2 input: a readable name, a category and the term."""

    name: str
    category: str
    term: Term


def phash2_cases() -> list[Case]:
    """About 300 terms covering every code path of make_hash2 that RabbitMQ can reach."""
    rng = random.Random(RANDOM_SEED)
    cases: list[Case] = []

    def add(category: str, name: str, term: Term) -> None:
        cases.append(Case(name, category, term))

    # Binaries: block boundaries (12-byte blocks), tails of every length, high bytes, NULs, UTF-8.
    add("binary", "<<>>", b(b""))
    fox = b"The quick brown fox jumps over the lazy dog"
    for n in range(1, 41):
        add("binary", f"ascii prefix len {n}", b(fox[:n]))
    for n in range(0, 31):
        add("binary", f"pattern len {n}", b(bytes((k * 37 + 11) & 0xFF for k in range(n))))
    for n in (100, 1000, 4096):
        add("binary", f"pattern len {n}", b(bytes((k * 131 + 7) & 0xFF for k in range(n))))
    add("binary", "bytes 0x80..0xff", b(bytes(range(0x80, 0x100))))
    for raw in (b"\x80", b"\xff", b"\xff\xfe\xfd", b"\xc3\x28", b"\xfe\xff\x00\x01"):
        add("binary", f"non-utf8 {raw.hex()}", b(raw))
    for raw in (b"\x00", b"\x00\x00\x00\x00", b"a\x00b", b"\x00" * 13):
        add("binary", f"nul {raw.hex()}", b(raw))
    for text in ("héllo", "日本語", "€", "😀", "naïve café"):
        add("binary", f"utf8 {text}", b(text))
    for text in ("hello", "Scott9", "abc", "1", "message_id", "v", "a", "b"):
        add("binary", f'<<"{text}">>', b(text))
    for n in range(50):
        add("binary", f'decimal <<"{n}">>', b(str(n)))

    # Integers: small/big boundaries of make_hash2 (28-bit signed, 32 and 64 bit digits) and ETF.
    ints = [
        0, 1, -1, 2, 42, 127, 128, 255, 256, 65535, 65536,
        2**27 - 1, 2**27, -(2**27), 2**28 - 1, 2**28, -(2**28), -(2**28) - 1,
        2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32, 2**32 + 1, -(2**32),
        2**59 - 1, 2**59, -(2**59), -(2**59) - 1, 2**63 - 1, 2**63, -(2**63),
        2**64 - 1, 2**64, 2**64 + 1, -(2**64), 2**100, -(2**100), 10**40, -(10**40),
        45914356, 59054609, 1700000000,
    ]  # fmt: skip
    for bits in (8, 16, 27, 28, 31, 32, 40, 59, 60, 63, 64, 65, 96, 128, 200):
        for _ in range(2):
            value = rng.getrandbits(bits) | (1 << (bits - 1))
            ints.extend((value, -value))
    for value in ints:
        add("integer", str(value), i(value))

    # Lists, including the shapes RabbitMQ routes with (routing key + CC keys).
    add("list", "[]", lst())
    add("list", '[<<"hello">>]', lst(b("hello")))
    add("list", '[<<"a">>, <<"b">>]', lst(b("a"), b("b")))
    add("list", '[<<"rk">>, <<"cc1">>, <<"cc2">>]', lst(b("rk"), b("cc1"), b("cc2")))
    add("list", "[1,2,3]", lst(i(1), i(2), i(3)))
    for text in ("a", "ab", "abc", "abcd", "abcde", "hello world"):
        add("list", f'"{text}"', charlist(text))
    add("list", '"héllo" (charlist)', charlist("héllo"))
    add("list", '"日本" (charlist)', charlist("日本"))
    add("list", "[1,256,2,1000,3]", lst(i(1), i(256), i(2), i(1000), i(3)))
    add("list", "[97,98,99,300,100]", lst(i(97), i(98), i(99), i(300), i(100)))
    add("list", "[255,256,-1,0]", lst(i(255), i(256), i(-1), i(0)))
    add("list", "[[]]", lst(lst()))
    add("list", "[[1],[2,[3]]]", lst(lst(i(1)), lst(i(2), lst(i(3)))))
    add("list", '[a,<<"b">>,{c},1.5]', lst(a("a"), b("b"), tup(a("c")), f(1.5)))
    add("list", "[1|2]", lst(i(1), tail=i(2)))
    add("list", '[1,2|<<"t">>]', lst(i(1), i(2), tail=b("t")))
    add("list", "[a|b]", lst(a("a"), tail=a("b")))
    add("list", "[2**64]", lst(i(2**64)))

    # Atoms: the AMQP field type atoms of rabbit_binary_parser and `undefined`.
    for name in ("undefined", "true", "false", "longstr", "signedint", "bool", "table", "array",
                 "void", "a", "abc", "hello world", "'quoted'", "ñandú", "日本語"):  # fmt: skip
        add("atom", name, a(name))

    # Tuples: header values as RabbitMQ 3.10.8 hashes them ({Type, Value}), and generic shapes.
    tuples: list[tuple[str, Term]] = [
        ("{}", tup()),
        ("{a}", tup(a("a"))),
        ("{a,1,{},-3.14}", tup(a("a"), i(1), tup(), f(-3.14))),
        ('{longstr,<<"v">>}', tup(a("longstr"), b("v"))),
        ('{longstr,<<"hello">>}', tup(a("longstr"), b("hello"))),
        ("{longstr,<<>>}", tup(a("longstr"), b(b""))),
        ("{signedint,5}", tup(a("signedint"), i(5))),
        ("{signedint,-5}", tup(a("signedint"), i(-5))),
        ("{long,5}", tup(a("long"), i(5))),
        ("{short,5}", tup(a("short"), i(5))),
        ("{byte,5}", tup(a("byte"), i(5))),
        ("{unsignedbyte,5}", tup(a("unsignedbyte"), i(5))),
        ("{unsignedshort,5}", tup(a("unsignedshort"), i(5))),
        ("{unsignedint,5}", tup(a("unsignedint"), i(5))),
        ("{bool,true}", tup(a("bool"), a("true"))),
        ("{bool,false}", tup(a("bool"), a("false"))),
        ("{void,undefined}", tup(a("void"), a("undefined"))),
        ("{double,1.5}", tup(a("double"), f(1.5))),
        ("{float,1.5}", tup(a("float"), f(1.5))),
        ("{timestamp,1700000000}", tup(a("timestamp"), i(1700000000))),
        ("{decimal,{2,12345}}", tup(a("decimal"), tup(i(2), i(12345)))),
        ("{binary,<<1,2>>}", tup(a("binary"), b(b"\x01\x02"))),
        ('{table,[{<<"k">>,longstr,<<"v">>}]}', tup(a("table"), lst(tup(b("k"), a("longstr"), b("v"))))),
        ("{table,[]}", tup(a("table"), lst())),
        ('{array,[{longstr,<<"a">>},{signedint,1}]}',
         tup(a("array"), lst(tup(a("longstr"), b("a")), tup(a("signedint"), i(1))))),
        ("{array,[]}", tup(a("array"), lst())),
        ("{1,2,3,4,5,6,7,8,9,10}", tup(*(i(k) for k in range(1, 11)))),
    ]  # fmt: skip
    for name, term in tuples:
        add("tuple", name, term)

    # Floats (make_hash2 hashes the IEEE bits; -0.0 included to show how OTP 25 treats it).
    floats = [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, 3.14, -3.14, 0.1, 1.0e300, -1.0e300, 5.0e-324,
              2.2250738585072014e-308, float(2**53), float(2**53) + 2.0, 1.7976931348623157e308]  # fmt: skip
    floats.extend(rng.uniform(-1e6, 1e6) for _ in range(4))
    for number in floats:
        add("float", repr(number), f(number))
    return cases


def exs_seeds() -> list[int]:
    """Seeds for the exs1024/exs1024s streams: edge values, the 21-bit mask boundary, randoms."""
    rng = random.Random(RANDOM_SEED + 1)
    seeds = [0, 1, 2, 42, 1000, 2**21 - 1, 2**21, 2**21 + 5, 2**27 - 1, 45914356, 59054609,
             -1, -2, -(2**21), 2**64 + 42]  # fmt: skip
    seeds.extend(rng.getrandbits(27) for _ in range(40))
    return seeds


STATE_SEEDS = (0, 1, 42, 2**21 - 1, 45914356)
"""Seeds whose initial 16-word exs1024 state is recorded too (for debugging a port)."""
N_OUTPUTS = 25
JUMP_BUCKETS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 16, 20, 64, 100, 1000, 1024, 10000]


def jump_cases() -> list[tuple[str, Term]]:
    """Keys as the plugin sees them: the routing-key binary, header/property terms or integers."""
    cases: list[tuple[str, Term]] = [(f'<<"{n}">>', b(str(n))) for n in range(200)]
    cases.append(("undefined", a("undefined")))
    for value in (0, 1, -1, 2, 42, 2**21 - 1, 2**21, 2**21 + 5, 2**27 - 1, 45914356, 59054609,
                  1700000000, 2**32, 2**64, -(2**100)):  # fmt: skip
        cases.append((f"integer {value}", i(value)))
    cases.extend(
        [
            ('<<"hello">>', b("hello")),
            ('[<<"a">>,<<"b">>] (a list: the plugin hashes its head)', lst(b("a"), b("b"))),
            ('{longstr,<<"v">>} (3.10.8 header value)', tup(a("longstr"), b("v"))),
            ("{signedint,5} (3.10.8 header value)", tup(a("signedint"), i(5))),
        ]
    )
    return cases


FORMATS = ["~tp", "~p", "~w", "~ts", "~s"]


def format_cases() -> list[tuple[str, Term]]:
    """Terms whose io_lib:format text RabbitMQ puts into error messages."""
    return [
        ('<<"abc">>', b("abc")),
        ("<<>>", b(b"")),
        ('<<" 5">>', b(" 5")),
        ('<<"1e3">>', b("1e3")),
        ('<<"héllo"/utf8>>', b("héllo")),
        ('<<"日本"/utf8>>', b("日本")),
        ("<<255,0,1>>", b(b"\xff\x00\x01")),
        ('<<"a\\nb">>', b("a\nb")),
        ('<<"tab\\there">>', b("tab\there")),
        ('<<"quote\\"d">>', b('quote"d')),
        ('<<"back\\\\slash">>', b("back\\slash")),
        ('<<"~p">>', b("~p")),
        ("<<0>>", b(b"\x00")),
        ("<<127>>", b(b"\x7f")),
        ("<<160,255>> (latin-1 printable)", b(b"\xa0\xff")),
        ("300-byte binary", b(bytes(ord("a") + k % 26 for k in range(300)))),
        ('200 x <<"a">>', b("a" * 200)),
        ("atom abc", a("abc")),
        ("atom undefined", a("undefined")),
        ("atom 'hello world'", a("hello world")),
        ("atom 'Abc'", a("Abc")),
        ("atom 'ñandú'", a("ñandú")),
        ("integer 0", i(0)),
        ("integer -1", i(-1)),
        ("integer 10000", i(10000)),
        ("integer 2**64", i(2**64)),
    ]


# Values that tests/data/reference/NOTES.md states; erl is the authority, these are cross-checked.
NOTES_CLAIMS: list[tuple[str, str, int]] = [
    ('<<"hello">>', "phash2", 47480723),
    ('<<"Scott9">>', "phash2", 38990304),
    ('<<"1">>', "phash2", 59054609),
    ("undefined", "phash2", 45914356),
    ("[]", "phash2", 113427502),
    ('[<<"hello">>]', "phash2", 106084785),
    ('{longstr,<<"hello">>}', "phash2", 5518530),
    ("true", "phash2", 506293),
    ("<<>>", "phash2_2_32", 147926629),
    ('<<"abc">>', "phash2_2_32", 1306188027),
    ("[]", "phash2_2_32", 3468870702),
    ("abc", "phash2_2_32", 26499),
    ("0", "phash2_2_32", 3175731469),
    ("-1", "phash2_2_32", 1117813597),
    ("3.14", "phash2_2_32", 3731709215),
    ("{a,1,{},-3.14}", "phash2_2_32", 1364396939),
]
NOTES_SEED42 = ["0.7439122544247125", "0.541885875940217", "0.5801447521196952"]


# --------------------------------------------------------------------------------------------
# The Erlang side
# --------------------------------------------------------------------------------------------

ESCRIPT = r"""%% -*- erlang -*-
%% Written by tools/gen_erlang_vectors.py into a temporary directory; not a project file.
-mode(compile).

main([InFile, PluginEbin]) ->
    {ok, Blob} = file:read_file(InFile),
    {PhashBlobs, Seeds, StateSeeds, NOut, JumpBlobs, Buckets, FmtBlobs, Formats} =
        binary_to_term(Blob),
    Canon = fun(B) -> T = binary_to_term(B),
                      {T, bool(term_to_binary(T, [{minor_version, 2}]) =:= B)} end,
    Phash = [begin {T, Ok} = Canon(B),
                   [Ok, erlang:phash2(T), erlang:phash2(T, 1 bsl 27), erlang:phash2(T, 1 bsl 32)]
             end || B <- PhashBlobs],
    Exs = [[exs(Alg, K, NOut, lists:member(K, StateSeeds)) || K <- Seeds]
           || Alg <- [exs1024, exs1024s]],
    JumpTerms = [Canon(B) || B <- JumpBlobs],
    Jump = [[Ok, key(T), [jump(T, N) || N <- Buckets]] || {T, Ok} <- JumpTerms],
    Plugin = plugin_jump(PluginEbin, [T || {T, _} <- JumpTerms], Buckets),
    Fmt = [begin {T, Ok} = Canon(B), [Ok, [fmt(F, T) || F <- Formats]] end || B <- FmtBlobs],
    io:format("~w~n", [[Phash, Exs, Jump, Plugin, Fmt]]).

bool(true) -> 1;
bool(false) -> 0.

%% First NOut uniform_s floats from seed_s(Alg, {K,K,K}) plus the raw 64-bit words, taken from
%% the algorithm handler's `next` fun (the same function uniform_s calls).
exs(Alg, K, NOut, WithState) ->
    S0 = {#{next := Next}, R0} = rand:seed_s(Alg, {K, K, K}),
    State = case WithState of true -> element(1, R0); false -> [] end,
    {Raw, _} = lists:mapfoldl(fun(_, R) -> Next(R) end, R0, lists:seq(1, NOut)),
    {Floats, _} = lists:mapfoldl(fun(_, S) -> rand:uniform_s(S) end, S0, lists:seq(1, NOut)),
    [K, State, Raw, [bits(F) || F <- Floats], [float_to_list(F, [short]) || F <- Floats]].

bits(F) -> <<U:64>> = <<F/float>>, U.

%% Lamping & Veach jump consistent hash exactly as the plugin calls it (N >= 1).
jump(_Key, 1) -> 0;
jump(Key, N) when is_list(Key) -> jump(hd(Key), N);
jump(Key, N) when is_integer(Key) -> jump_loop(-1, 0, N, rand:seed_s(exs1024, {Key, Key, Key}));
jump(Key, N) -> jump(erlang:phash2(Key), N).

jump_loop(B, J, N, _S) when J >= N -> B;
jump_loop(_B, J, N, S0) ->
    {R, S} = rand:uniform_s(S0),
    jump_loop(J, trunc((J + 1) / R), N, S).

key(Key) when is_list(Key) -> key(hd(Key));
key(Key) when is_integer(Key) -> Key;
key(Key) -> erlang:phash2(Key).

%% The plugin's own jump_consistent_hash/2 is not exported: rebuild the module in memory from
%% its debug info with export_all and call it. Returns [] when the beam is not available.
plugin_jump("none", _Terms, _Buckets) -> [];
plugin_jump(Ebin, Terms, Buckets) ->
    Beam = filename:join(Ebin, "rabbit_exchange_type_consistent_hash.beam"),
    {ok, {Mod, [{abstract_code, {raw_abstract_v1, Forms}}]}} =
        beam_lib:chunks(Beam, [abstract_code]),
    {ok, Mod, Bin} = compile:forms(Forms, [binary, export_all, nowarn_export_all, return_errors]),
    {module, Mod} = code:load_binary(Mod, Beam, Bin),
    [[Mod:jump_consistent_hash(T, N) || N <- Buckets] || T <- Terms].

fmt(Format, Term) ->
    try lists:flatten(io_lib:format(Format, [Term])) of
        Chars -> [1, Chars]
    catch
        error:_ -> [0, []]
    end.
"""


def run_erlang(payload: bytes, plugin_ebin: str | None, escript: str) -> list[Any]:
    """Run the escript on the ETF payload and return its single JSON-compatible result line."""
    with tempfile.TemporaryDirectory(prefix="gen_erlang_vectors_") as tmp:
        script = Path(tmp) / "vectors.escript"
        script.write_text(ESCRIPT, encoding="utf-8")
        data = Path(tmp) / "input.etf"
        data.write_bytes(payload)
        proc = subprocess.run(
            [escript, str(script), str(data), plugin_ebin or "none"],
            capture_output=True,
            check=False,
            timeout=600,
        )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode("utf-8", "replace") + proc.stdout.decode("utf-8", "replace"))
        raise SystemExit(f"escript failed with exit code {proc.returncode}")
    result: list[Any] = json.loads(proc.stdout)
    return result


def _payload_body(value: Any) -> bytes:
    """ETF body for the escript's input (ints, bytes, str as charlists, tuples, lists)."""
    if isinstance(value, bytes):
        return _etf_body(b(value))
    if isinstance(value, int):
        return _etf_int(value)
    if isinstance(value, str):
        return _etf_body(charlist(value))
    if isinstance(value, tuple):
        return bytes([104, len(value)]) + b"".join(_payload_body(x) for x in value)
    if isinstance(value, list):
        if not value:
            return b"\x6a"
        return b"\x6c" + struct.pack(">I", len(value)) + b"".join(_payload_body(x) for x in value) + b"\x6a"
    raise TypeError(type(value))


def chars(codepoints: Sequence[int]) -> str:
    """Erlang charlist (code points) to a Python string."""
    return "".join(map(chr, codepoints))


# --------------------------------------------------------------------------------------------
# Building the document
# --------------------------------------------------------------------------------------------

EXS_DOC = {
    "source": "lib/stdlib/src/rand.erl, OTP 25.2.3 (read from the installed rand.beam debug info)",
    "seed": "seed_s(Alg, {A1,A2,A3}) for Alg in exs1024 / exs1024s (same seeding): "
    "B1 = (((A1 band (2^21-1)) + 1) * 2097131) band (2^21-1); "
    "B2 = (((A2 band (2^21-1)) + 1) * 2097133) band (2^21-1); "
    "B3 = (((A3 band (2^21-1)) + 1) * 2097143) band (2^21-1); "
    "X = (B1 bsl 43) bor (B2 bsl 22) bor (B3 bsl 1) bor 1 (band on negative integers is two's complement).",
    "fill": "16 words from exs64 (xorshift64*) starting at R = X, each step: R1 = R xor (R bsr 12); "
    "R2 = R1 xor ((R1 band (2^39-1)) bsl 25); R3 = R2 xor (R2 bsr 27); word = (R3 * 2685821657736338717) "
    "mod 2^64; next R = R3 (not the product). The Erlang state list is the words in REVERSE order of "
    "generation: s[0] = 16th word ... s[15] = 1st word ('state0' below lists s[0..15]).",
    "next": "xorshift1024* with index p starting at 0: S0 = s[p]; p = (p+1) mod 16; S1 = s[p]; "
    "S11 = S1 xor ((S1 band (2^33-1)) bsl 31); S12 = S11 xor (S11 bsr 11); S01 = S0 xor (S0 bsr 30); "
    "s[p] = S01 xor S12; output V = (s[p] * 1181783497276652981) mod 2^64 ('raw' below).",
    "uniform_s exs1024": "max = 2^64-1, no 'bits': F = V / 18446744073709551616 (V converted to the nearest "
    "double, then divided; equals Python V / 2**64). Can be 1.0 when V rounds up to 2^64. This is the "
    "algorithm the consistent-hash plugin uses.",
    "uniform_s exs1024s": "bits = 64: F = (V bsr 11) * 2^-53 (exact; never 1.0). Differs from exs1024 in the "
    "last bits for some outputs.",
    "fields": "seed: K of seed_s(Alg, {K,K,K}); raw: the first 25 next() words (from the algorithm "
    "handler's next fun, identical for both algorithms); floats_hex: IEEE bits of the first 25 uniform_s "
    "results; floats_text: float_to_list(F, [short]) of them; state0: initial s[0..15] (a few seeds).",
}

JUMP_DOC = (
    "rabbit_exchange_type_consistent_hash:jump_consistent_hash(Key, N) of RabbitMQ 3.10.8 (not exported; "
    "re-implemented in the escript and, when the plugin beam is installed, checked against the plugin's "
    "own function): N == 1 -> 0; a list key -> its head; an integer key K -> Lamping-Veach with "
    "rand:seed_s(exs1024, {K,K,K}): B = -1, J = 0; while J < N: B = J; R = uniform_s; "
    "J = trunc((B + 1) / R); result B; any other term -> jump(erlang:phash2(Term), N). "
    "'key' is the integer that seeds the generator; 'results' align with 'buckets'."
)

FORMAT_DOC = (
    "lists:flatten(io_lib:format(Format, [Term])) as a string of code points (Erlang charlist), per "
    "format in 'formats'; null when io_lib:format raises. RabbitMQ 3.10.8's consistent-hash plugin uses "
    '"The binding key must be an integer: ~p" (~p, not ~tp) and rabbit_misc:format flattens it; '
    "rabbit_binary_generator then does list_to_binary (each code point is one byte) and, if "
    "'TEXT - explanation' exceeds 255 bytes, keeps the first 252 bytes and appends '...'."
)


def build_document(plugin_ebin: str | None, escript: str) -> tuple[dict[str, Any], list[str]]:
    """Compute everything with erl; return the JSON document and human-readable warnings."""
    phash = phash2_cases()
    seeds = exs_seeds()
    jumps = jump_cases()
    fmts = format_cases()
    payload = b"\x83" + _payload_body(
        (
            [etf(c.term) for c in phash],
            seeds,
            list(STATE_SEEDS),
            N_OUTPUTS,
            [etf(t) for _, t in jumps],
            JUMP_BUCKETS,
            [etf(t) for _, t in fmts],
            FORMATS,
        )
    )
    phash_out, exs_out, jump_out, plugin_out, fmt_out = run_erlang(payload, plugin_ebin, escript)
    warnings: list[str] = []

    def canonical(ok: int, name: str) -> None:
        if ok != 1:
            raise SystemExit(f"ETF encoding of {name!r} is not what term_to_binary produces; fix etf()")

    phash_records = []
    by_name: dict[str, dict[str, Any]] = {}
    for case, (ok, h, h27, h32) in zip(phash, phash_out, strict=True):
        canonical(ok, case.name)
        if h != h27:
            raise SystemExit(f"phash2/1 != phash2(T, 2^27) for {case.name}")
        record = {"name": case.name, "category": case.category, "term": case.term,
                  "phash2": h, "phash2_2_27": h27, "phash2_2_32": h32}  # fmt: skip
        phash_records.append(record)
        by_name.setdefault(case.name, record)

    crosscheck = []
    for name, field, claimed in NOTES_CLAIMS:
        actual = by_name[name][field]
        crosscheck.append({"name": name, "field": field, "notes_md": claimed, "erl": actual,
                           "agree": actual == claimed})  # fmt: skip
        if actual != claimed:
            warnings.append(f"NOTES.md says {field}({name}) = {claimed}, erl says {actual}")

    exs_sections: dict[str, Any] = {}
    for alg, rows in zip(("exs1024", "exs1024s"), exs_out, strict=True):
        seed_records = []
        for k, state, raw, bits, texts in rows:
            rec: dict[str, Any] = {"seed": k}
            if state:
                rec["state0"] = state
            rec["raw"] = raw
            rec["floats_hex"] = [format(x, "016x") for x in bits]
            rec["floats_text"] = [chars(t) for t in texts]
            seed_records.append(rec)
        exs_sections[alg] = {"alg": alg, "seeds": seed_records}
    seed42 = next(r for r in exs_sections["exs1024"]["seeds"] if r["seed"] == 42)
    if seed42["floats_text"][:3] != NOTES_SEED42:
        warnings.append(f"NOTES.md seed 42 floats {NOTES_SEED42} != erl {seed42['floats_text'][:3]}")
    crosscheck.append({"name": "exs1024 seed {42,42,42}", "field": "first 3 uniform_s",
                       "notes_md": NOTES_SEED42, "erl": seed42["floats_text"][:3],
                       "agree": seed42["floats_text"][:3] == NOTES_SEED42})  # fmt: skip
    raw_equal = all(
        x["raw"] == y["raw"]
        for x, y in zip(exs_sections["exs1024"]["seeds"], exs_sections["exs1024s"]["seeds"], strict=True)
    )
    if not raw_equal:
        raise SystemExit("exs1024 and exs1024s raw streams differ; the documented model is wrong")

    jump_records = []
    for (name, term), (ok, key, results) in zip(jumps, jump_out, strict=True):
        canonical(ok, name)
        jump_records.append({"name": name, "term": term, "key": key, "results": results})
    if plugin_out:
        for rec, plugin_results in zip(jump_records, plugin_out, strict=True):
            if rec["results"] != plugin_results:
                raise SystemExit(f"jump mismatch with the plugin for {rec['name']}: {plugin_results}")
    else:
        warnings.append("consistent-hash plugin beam not found: jump results not checked against it")
    undefined = next(r for r in jump_records if r["name"] == "undefined")
    for n, expected in [(2, 1), (3, 1), (5, 1), (10, 1), (100, 39)]:
        got = undefined["results"][JUMP_BUCKETS.index(n)]
        if got != expected:
            warnings.append(f"NOTES.md says jump(undefined, {n}) = {expected}, erl says {got}")

    format_records = []
    for (name, term), (ok, outs) in zip(fmts, fmt_out, strict=True):
        canonical(ok, name)
        texts = {fm: (chars(o[1]) if o[0] == 1 else None) for fm, o in zip(FORMATS, outs, strict=True)}
        format_records.append({"name": name, "term": term, **texts})

    document = {
        "doc": {
            "what": "Reference values computed by Erlang/OTP 25 (erl) for hashbroker's port of "
            "erlang:phash2, rand exs1024/exs1024s, RabbitMQ's jump consistent hash and io_lib:format.",
            "how": "Generated by `.venv/bin/python tools/gen_erlang_vectors.py`; do not edit by hand. "
            "Every term was sent to erl as external term format and re-encoded by term_to_binary "
            "byte-for-byte, so the tagged encoding below names exactly the term that was hashed.",
            "term_encoding": TERM_DOC,
            "otp_release": "25",
        },
        "notes_crosscheck": crosscheck,
        "phash2": {
            "doc": "phash2 = erlang:phash2(T) (27-bit), phash2_2_27 = erlang:phash2(T, 1 bsl 27), "
            "phash2_2_32 = erlang:phash2(T, 1 bsl 32).",
            "cases": phash_records,
        },
        "exs1024": {"doc": EXS_DOC, **exs_sections["exs1024"]},
        "exs1024s": {
            "doc": "Same seeds and raw words as exs1024; only uniform_s differs (see exs1024.doc).",
            **exs_sections["exs1024s"],
        },
        "jump": {"doc": JUMP_DOC, "buckets": JUMP_BUCKETS, "cases": jump_records},
        "erlang_format": {"doc": FORMAT_DOC, "formats": FORMATS, "cases": format_records},
    }
    return document, warnings


# --------------------------------------------------------------------------------------------
# Deterministic "pretty but compact" JSON
# --------------------------------------------------------------------------------------------


def to_json(value: Any, indent: int = 0, width: int = 200) -> str:
    """Indent containers, but keep short ones and lists of scalars on one line (diff-friendly)."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    is_scalar_list = isinstance(value, list) and not any(isinstance(x, dict | list) for x in value)
    if not isinstance(value, dict | list) or is_scalar_list or len(flat) + indent <= width:
        return flat
    pad = " " * (indent + 1)
    if isinstance(value, list):
        inner = [pad + to_json(x, indent + 1, width) for x in value]
        return "[\n" + ",\n".join(inner) + "\n" + " " * indent + "]"
    items = [
        f"{pad}{json.dumps(k, ensure_ascii=False)}: {to_json(v, indent + 1, width)}" for k, v in value.items()
    ]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--escript", default="escript", help="escript executable (Erlang/OTP 25)")
    parser.add_argument(
        "--plugin-ebin",
        default=None,
        help="ebin dir of rabbitmq_consistent_hash_exchange (default: auto-detect under /usr/lib/rabbitmq)",
    )
    parser.add_argument("--check", action="store_true", help="only verify that --output is up to date")
    args = parser.parse_args(argv)

    plugin_ebin = args.plugin_ebin
    if plugin_ebin is None:
        found = sorted(glob.glob(PLUGIN_EBIN_GLOB))
        plugin_ebin = found[-1] if found else None
    document, warnings = build_document(plugin_ebin, args.escript)
    text = to_json(document) + "\n"
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; rerun without --check", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
