"""`topic`: binding keys are dot-separated word patterns where `*` is one word and `#` is any number.

Semantics follow RabbitMQ 3.10's `rabbit_exchange_type_topic` rather than the AMQP spec's prose:

* Keys split on every "." byte, so empty words are real words ("a..b" is three words, "." is two),
  except that the empty key is *zero* words (`split_topic_key(<<>>) -> []`). Hence "#" matches "",
  "*" does not, and "" as a binding key matches only the routing key "".
* A "*" or "#" inside a routing key is an ordinary word for the routing key; only binding keys have
  wildcards (RabbitMQ also follows the literal "*"/"#" edges for such words, which can only yield
  destinations the wildcard edges yield anyway).
* Every entry of `message.routing_keys` (routing key, CC, BCC) is routed; the union is returned.

Where a binding is kept depends on the shape of its key, because Python pays per trie node visited:

* no wildcard: a dict keyed by the binding key, since only the identical routing key can match;
* "*" but no "#": a trie per word count, since such a pattern only matches keys of that length;
* "#": a trie like RabbitMQ's (one edge per word, "*" and "#" edges), walked as an NFA. A "#" node
  stays live for every remaining word and re-probes its children each time, which makes this the
  slow part, so for each key length actually routed the "#" patterns are also expanded into
  "*"-only patterns of exactly that length ("a.#.b" at 4 words is "a.*.*.b") and kept in a
  per-length trie that is walked instead (about 3x faster with 10,000 bindings). Expansion is
  skipped for lengths where it would blow up (several "#" in long keys); the NFA handles those.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import comb

from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.registry import register

STAR = "*"
HASH = "#"

MAX_EXPANDED_WORDS = 32
"""Longest routing key (in words) for which "#" patterns are expanded; longer keys use the NFA."""
MAX_EXPANSIONS_PER_BINDING = 64
"""A binding with more "*"-only forms than this at some length makes that length use the NFA."""
EXPANSION_WORDS_PER_BINDING = 16
"""Pattern words allowed per "#" binding across *all* expanded lengths together: the memory bound.
A per-length bound is not enough: 10,000 "k.#" bindings expanded for every key length up to 32
words would hold 5 million trie nodes (measured: 1.2 GB)."""
EXPANSION_WORDS_BASE = 4096


def split_topic_key(key: str) -> list[str]:
    """Words of a key the way RabbitMQ splits it (the empty key has no words at all)."""
    return key.split(".") if key else []


class _Node:
    """A trie node. `*` and `#` edges get their own slots so matching needs no dict lookup for them."""

    __slots__ = ("children", "dests", "hash", "is_hash", "parent", "stamp", "star", "word")

    def __init__(self, parent: _Node | None = None, word: str = "") -> None:
        self.parent = parent
        self.word = word
        self.is_hash = word == HASH
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.hash: _Node | None = None
        # Several bindings (same destination and key, different arguments; or different "#" keys
        # with a common expansion) can end on one node, so destinations are reference-counted.
        self.dests: dict[Destination, int] = {}
        self.stamp = 0

    def child(self, word: str) -> _Node | None:
        if word == STAR:
            return self.star
        if word == HASH:
            return self.hash
        return self.children.get(word)

    def add_child(self, word: str) -> _Node:
        node = _Node(self, word)
        if word == STAR:
            self.star = node
        elif word == HASH:
            self.hash = node
        else:
            self.children[word] = node
        return node

    def detach(self) -> None:
        parent = self.parent
        assert parent is not None, "the root is never detached"
        if self.word == STAR:
            parent.star = None
        elif self.word == HASH:
            parent.hash = None
        else:
            del parent.children[self.word]
        self.parent = None

    def is_empty(self) -> bool:
        return not (self.dests or self.children or self.star is not None or self.hash is not None)


class _Trie:
    """Patterns as paths of words; destinations sit on the node where a pattern ends."""

    __slots__ = ("root",)

    def __init__(self) -> None:
        self.root = _Node()

    def is_empty(self) -> bool:
        return self.root.is_empty()

    def add(self, words: Sequence[str], destination: Destination) -> None:
        node = self.root
        for word in words:
            node = node.child(word) or node.add_child(word)
        node.dests[destination] = node.dests.get(destination, 0) + 1

    def remove(self, words: Sequence[str], destination: Destination) -> None:
        """Drop one reference, then prune the now-useless tail of the path like RabbitMQ's
        `remove_path_if_empty`, so binding churn cannot grow the trie."""
        node: _Node | None = self.root
        for word in words:
            node = node.child(word) if node is not None else None
        if node is None:  # not present: RabbitMQ ignores this too
            return
        count = node.dests.get(destination, 0)
        if count > 1:
            node.dests[destination] = count - 1
            return
        node.dests.pop(destination, None)
        while node.parent is not None and node.is_empty():
            parent = node.parent
            node.detach()
            node = parent

    def match(self, words: list[str], out: dict[Destination, int]) -> None:
        """Run the trie as an NFA over `words`, adding matched destinations to `out`.

        RabbitMQ walks depth first and re-explores the same (node, position) once per way of
        splitting the key between several "#", exponential in the number of "#" for long keys.
        Advancing the set of live nodes one word at a time visits each (node, position) once.
        """
        token = next(_STEPS)
        active = [self.root]
        _activate_hashes(self.root.hash, active, token)
        if not words:
            for node in active:
                if node.dests:
                    out.update(node.dests)
            return
        for word in words[:-1]:
            active = _step(active, word)
            if not active:
                return
        _last_step(active, words[-1], out)


_STEPS = itertools.count(1)
"""Step tokens for `_Node.stamp`. A fresh token per word keeps a "#" node from being activated twice
in one step without allocating a set; `next()` on a count is atomic, and a stale stamp left by a
concurrent walk can only cause a harmless duplicate, never a miss."""


def _activate_hashes(node: _Node | None, active: list[_Node], token: int) -> None:
    """Activate a "#" node and any "#.#" chain below it: "#" may match zero words, so it is live as
    soon as its parent is."""
    while node is not None and node.stamp != token:
        node.stamp = token
        active.append(node)
        node = node.hash


def _step(active: list[_Node], word: str) -> list[_Node]:
    """Consume one word that is not the last one."""
    token = next(_STEPS)
    live: list[_Node] = []
    append = live.append
    for node in active:
        child = node.children.get(word)
        if child is not None:
            append(child)
            if child.hash is not None:
                _activate_hashes(child.hash, live, token)
        child = node.star
        if child is not None:
            append(child)
            if child.hash is not None:
                _activate_hashes(child.hash, live, token)
        if node.is_hash and node.stamp != token:
            node.stamp = token
            append(node)
    return live


def _last_step(active: list[_Node], word: str, out: dict[Destination, int]) -> None:
    """Consume the last word, reading destinations straight off the nodes it reaches rather than
    building a list of live nodes only to walk it again (`out` absorbs duplicates)."""
    for node in active:
        child = node.children.get(word)
        if child is not None:
            if child.dests:
                out.update(child.dests)
            if child.hash is not None:
                _collect_hashes(child.hash, out)
        child = node.star
        if child is not None:
            if child.dests:
                out.update(child.dests)
            if child.hash is not None:
                _collect_hashes(child.hash, out)
        if node.is_hash and node.dests:
            out.update(node.dests)


def _collect_hashes(node: _Node | None, out: dict[Destination, int]) -> None:
    while node is not None:
        if node.dests:
            out.update(node.dests)
        node = node.hash


def count_expansions(words: Sequence[str], length: int) -> int:
    """How many ways the "#" words of a pattern can share out the spare words of a `length`-word key."""
    hashes = words.count(HASH)
    spare = length - (len(words) - hashes)
    if spare < 0:
        return 0
    return comb(spare + hashes - 1, hashes - 1) if hashes else 1


def expand(words: Sequence[str], length: int) -> set[tuple[str, ...]]:
    """The "*"-only patterns of exactly `length` words equivalent to `words` at that length.

    A set, because different shares can give the same pattern ("#.#" at 2 words is "*.*" three
    ways) and each binding must be counted once per node to keep reference counts right.
    """
    hashes = words.count(HASH)
    spare = length - (len(words) - hashes)
    if spare < 0:
        return set()
    if hashes == 0:
        return {tuple(words)} if spare == 0 else set()
    out: set[tuple[str, ...]] = set()
    for cuts in itertools.combinations_with_replacement(range(spare + 1), hashes - 1):
        shares = [b - a for a, b in zip((0, *cuts), (*cuts, spare), strict=True)]
        it = iter(shares)
        pattern: list[str] = []
        for word in words:
            if word == HASH:
                pattern.extend([STAR] * next(it))
            else:
                pattern.append(word)
        out.add(tuple(pattern))
    return out


class _Expanded:
    """The "#" patterns expanded for one key length, with the pattern words it holds (its cost)."""

    __slots__ = ("size", "trie")

    def __init__(self) -> None:
        self.trie = _Trie()
        self.size = 0


@register
class TopicExchange(ExchangeType):
    """See the module docstring for the layout. `route` may build an expanded trie on the first
    message of a new key length (a few ms for 10,000 short bindings) while the memory budget lasts;
    later churn keeps it up to date."""

    type_name = "topic"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._exact: dict[str, dict[Destination, int]] = {}
        self._fixed: dict[int, _Trie] = {}
        self._hashed = _Trie()
        self._hash_bindings: dict[Binding, list[str]] = {}
        self._expanded: dict[int, _Expanded] = {}
        self._expanded_words = 0
        self._not_expandable: set[int] = set()

    def add_binding(self, binding: Binding) -> None:
        if self.has_binding(binding):
            return
        super().add_binding(binding)
        words = split_topic_key(binding.key)
        if HASH in words:
            self._add_hash_binding(binding, words)
        elif STAR in words:
            self._fixed.setdefault(len(words), _Trie()).add(words, binding.destination)
        else:
            dests = self._exact.setdefault(binding.key, {})
            dests[binding.destination] = dests.get(binding.destination, 0) + 1

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        present = [b for b in bindings if self.has_binding(b)]
        super().remove_bindings(present)
        for binding in present:
            self._forget(binding)

    def route(self, message: Message) -> list[Destination]:
        out: dict[Destination, int] = {}
        exact = self._exact
        fixed = self._fixed
        has_hash = bool(self._hash_bindings)
        for key in message.routing_keys:
            found = exact.get(key)
            if found:
                out.update(found)
            if not (fixed or has_hash):
                continue
            words = split_topic_key(key)
            trie = fixed.get(len(words))
            if trie is not None:
                trie.match(words, out)
            if has_hash:
                self._hash_trie_for(len(words)).match(words, out)
        return list(out)

    @property
    def state_summary(self) -> dict[str, object]:
        return {
            "bindings": self.binding_count,
            "exact_keys": len(self._exact),
            "star_lengths": sorted(self._fixed),
            "hash_bindings": len(self._hash_bindings),
            "expanded_lengths": sorted(self._expanded),
        }

    def _hash_trie_for(self, length: int) -> _Trie:
        """The expanded trie for this key length, building it on first use, else the NFA trie."""
        expanded = self._expanded.get(length)
        if expanded is None and length not in self._not_expandable:
            expanded = self._build_expanded(length)
        return expanded.trie if expanded is not None else self._hashed

    def _budget(self) -> int:
        """Pattern words all expanded lengths together may hold."""
        return EXPANSION_WORDS_PER_BINDING * len(self._hash_bindings) + EXPANSION_WORDS_BASE

    def _build_expanded(self, length: int) -> _Expanded | None:
        counts = [count_expansions(words, length) for words in self._hash_bindings.values()]
        if (
            length > MAX_EXPANDED_WORDS
            or max(counts, default=0) > MAX_EXPANSIONS_PER_BINDING
            or self._expanded_words + sum(counts) * length > self._budget()
        ):
            self._not_expandable.add(length)
            return None
        expanded = _Expanded()
        for binding, words in self._hash_bindings.items():
            expanded.size += _add_expansions(expanded.trie, words, length, binding.destination)
        self._expanded[length] = expanded
        self._expanded_words += expanded.size
        return expanded

    def _add_hash_binding(self, binding: Binding, words: list[str]) -> None:
        self._hash_bindings[binding] = words
        self._hashed.add(words, binding.destination)
        for length, expanded in list(self._expanded.items()):
            if _blocks_expansion(words, length):
                self._drop_expanded(length)
                continue
            added = _add_expansions(expanded.trie, words, length, binding.destination)
            expanded.size += added
            self._expanded_words += added
            if self._expanded_words > self._budget():
                self._drop_expanded(length)

    def _drop_expanded(self, length: int) -> None:
        self._expanded_words -= self._expanded.pop(length).size
        self._not_expandable.add(length)

    def _forget(self, binding: Binding) -> None:
        words = split_topic_key(binding.key)
        if HASH in words:
            del self._hash_bindings[binding]
            self._hashed.remove(words, binding.destination)
            for length, expanded in self._expanded.items():
                for pattern in expand(words, length):
                    expanded.trie.remove(pattern, binding.destination)
                    expanded.size -= length
                    self._expanded_words -= length
            # A length this binding made unexpandable gets another chance on its next use.
            self._not_expandable = {n for n in self._not_expandable if not _blocks_expansion(words, n)}
        elif STAR in words:
            trie = self._fixed[len(words)]
            trie.remove(words, binding.destination)
            if trie.is_empty():
                del self._fixed[len(words)]
        else:
            dests = self._exact[binding.key]
            count = dests.pop(binding.destination)
            if count > 1:
                dests[binding.destination] = count - 1
            if not dests:
                del self._exact[binding.key]


def _blocks_expansion(words: Sequence[str], length: int) -> bool:
    return length <= MAX_EXPANDED_WORDS and count_expansions(words, length) > MAX_EXPANSIONS_PER_BINDING


def _add_expansions(trie: _Trie, words: Sequence[str], length: int, destination: Destination) -> int:
    """Add the "*"-only forms of a "#" pattern at `length`; returns the pattern words added."""
    patterns = expand(words, length)
    for pattern in patterns:
        trie.add(pattern, destination)
    return len(patterns) * length
