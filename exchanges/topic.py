"""`topic`: binding keys are dot-separated word patterns where `*` is one word and `#` is any number.

Semantics follow RabbitMQ 3.10's `rabbit_exchange_type_topic` rather than the AMQP spec's prose:

* Keys split on every "." byte, so empty words are real words ("a..b" is three words, "." is two),
  except that the empty key is *zero* words (`split_topic_key(<<>>) -> []`). Hence "#" matches "",
  "*" does not, and "" as a binding key matches only the routing key "".
* A "*" or "#" inside a routing key is an ordinary word for the routing key; only binding keys have
  wildcards (RabbitMQ also looks up the literal "*"/"#" edges, which can only add destinations the
  wildcard edges already produce).
* Every entry of `message.routing_keys` (routing key, CC, BCC) is routed; the union is returned.

Wildcard-free binding keys can only match the identical routing key, so they live in a dict and
never touch the trie; only wildcard patterns are stored in a trie with one edge per word, like
RabbitMQ's `rabbit_topic_trie_edge` table. Matching walks the trie instead of scanning bindings.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.registry import register

STAR = "*"
HASH = "#"


def split_topic_key(key: str) -> list[str]:
    """Words of a key the way RabbitMQ splits it (the empty key has no words at all)."""
    return key.split(".") if key else []


def has_wildcard(words: Iterable[str]) -> bool:
    return any(word == STAR or word == HASH for word in words)


_UNBOUNDED = 1 << 30
"""`_Node.hi` when a "#" lies ahead: any number of further words may still match."""


class _Node:
    """A trie node. `*` and `#` edges get their own slots so matching needs no dict lookup for them.

    `lo`/`hi` bound how many more words the patterns below this node can consume (a "#" counts as
    zero words and makes `hi` unbounded). Matching drops a node as soon as the words left in the key
    fall outside that range: in a trie of 3-5 word patterns most partial matches die for length,
    and dropping them early roughly halves the work on the "#" trie.
    """

    __slots__ = (
        "children",
        "dests",
        "hash",
        "hi",
        "is_hash",
        "lo",
        "parent",
        "rests",
        "stamp",
        "star",
        "word",
    )

    def __init__(self, parent: _Node | None = None, word: str = "") -> None:
        self.parent = parent
        self.word = word
        self.is_hash = word == HASH
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.hash: _Node | None = None
        # Several bindings (same destination and key, different arguments) can end on one node, so
        # destinations are reference-counted; removing one of them must not unroute the others.
        self.dests: dict[Destination, int] = {}
        self.stamp = 0
        # (non-"#" words still to match, whether a "#" is among them) -> bindings below with that rest.
        self.rests: dict[tuple[int, bool], int] = {}
        self.lo = 0
        self.hi = _UNBOUNDED

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

    def count_rest(self, rest: tuple[int, bool], delta: int) -> None:
        count = self.rests.get(rest, 0) + delta
        if count > 0:
            self.rests[rest] = count
        else:
            self.rests.pop(rest, None)
        if self.rests:
            self.lo = min(words for words, _ in self.rests)
            unbounded = any(hashed for _, hashed in self.rests)
            self.hi = _UNBOUNDED if unbounded else max(words for words, _ in self.rests)


def _rests(words: list[str]) -> list[tuple[int, bool]]:
    """For each depth 0..len(words), what the rest of the pattern still needs (see `_Node.rests`)."""
    out = [(0, False)]
    for word in reversed(words):
        needed, hashed = out[-1]
        out.append((needed, True) if word == HASH else (needed + 1, hashed))
    out.reverse()
    return out


_STEPS = itertools.count(1)
"""Step tokens for `_Node.stamp`. A fresh token per word keeps a "#" node from being activated twice
in one step without allocating a set; `next()` on a count is atomic, and a stale stamp left by a
concurrent walk can only cause a harmless duplicate, never a miss."""


def _activate_hashes(node: _Node | None, active: list[_Node], token: int, left: int) -> None:
    """Activate a "#" node (and a "#.#" chain below it): "#" may match zero words, so it is live as
    soon as its parent is, provided the words left can still satisfy what follows it."""
    while node is not None and node.stamp != token and node.lo <= left:
        node.stamp = token
        active.append(node)
        node = node.hash


def _match(root: _Node, words: list[str], out: dict[Destination, int]) -> None:
    """Run the trie as an NFA over `words`, adding matched destinations to `out`.

    RabbitMQ walks the trie depth first and re-explores the same (node, position) once per way of
    splitting the key between several "#" (exponential in the number of "#" for long keys). Keeping
    the set of live nodes per word instead visits each (node, position) once, and a "#" node simply
    stays live while it swallows words.
    """
    token = next(_STEPS)
    active = [root]
    left = len(words)
    _activate_hashes(root.hash, active, token, left)
    if not words:
        _collect(active, out)
        return
    for word in words[:-1]:
        left -= 1
        active = _step(active, word, left)
        if not active:
            return
    _last_step(active, words[-1], out)


def _step(active: list[_Node], word: str, left: int) -> list[_Node]:
    """Consume one word that is not the last; `left` words follow it."""
    token = next(_STEPS)
    live: list[_Node] = []
    append = live.append
    for node in active:
        child = node.children.get(word)
        if child is not None and child.lo <= left <= child.hi:
            append(child)
            if child.hash is not None:
                _activate_hashes(child.hash, live, token, left)
        child = node.star
        if child is not None and child.lo <= left <= child.hi:
            append(child)
            if child.hash is not None:
                _activate_hashes(child.hash, live, token, left)
        if node.is_hash and node.stamp != token and node.lo <= left:
            node.stamp = token
            append(node)
    return live


def _last_step(active: list[_Node], word: str, out: dict[Destination, int]) -> None:
    """The final word: read destinations straight off the matched nodes instead of building a list
    of live nodes only to walk it again. Duplicates are harmless here, `out` dedupes."""
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


def _collect(active: list[_Node], out: dict[Destination, int]) -> None:
    for node in active:
        if node.dests:
            out.update(node.dests)


@register
class TopicExchange(ExchangeType):
    """Bindings live in one of three places, chosen by the shape of the binding key:

    * no wildcard: a dict keyed by the binding key, since only the identical routing key matches;
    * "*" but no "#": a trie per word count, since such a pattern only matches keys of exactly its
      length; a routing key then never walks patterns of other lengths;
    * "#": one trie shared by all lengths.
    """

    type_name = "topic"

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._bindings: dict[Binding, None] = {}
        self._exact: dict[str, dict[Destination, int]] = {}
        self._by_length: dict[int, _Node] = {}
        self._hash_root = _Node()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    # The base class keeps bindings in a list; a dict makes unbinding O(1) instead of O(bindings).
    @property
    def bindings(self) -> list[Binding]:
        return list(self._bindings)

    @bindings.setter
    def bindings(self, value: Sequence[Binding]) -> None:
        self._bindings = {}
        self._exact = {}
        self._by_length = {}
        self._hash_root = _Node()
        for binding in value:
            self.add_binding(binding)

    def add_binding(self, binding: Binding) -> None:
        if binding in self._bindings:
            return
        self._bindings[binding] = None
        words = split_topic_key(binding.key)
        if has_wildcard(words):
            dests = self._node_for(self._trie_for(words, create=True), words).dests
            self._count_rests(binding, words, +1)
        else:
            dests = self._exact.setdefault(binding.key, {})
        dests[binding.destination] = dests.get(binding.destination, 0) + 1

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        for binding in bindings:
            if binding in self._bindings:
                del self._bindings[binding]
                self._forget(binding)

    def route(self, message: Message) -> list[Destination]:
        out: dict[Destination, int] = {}
        exact = self._exact
        by_length = self._by_length
        hash_root = self._hash_root
        walk_hash = not hash_root.is_empty()
        for key in message.routing_keys:
            found = exact.get(key)
            if found:
                out.update(found)
            if not (by_length or walk_hash):
                continue
            words = split_topic_key(key)
            fixed = by_length.get(len(words))
            if fixed is not None:
                _match(fixed, words, out)
            if walk_hash:
                _match(hash_root, words, out)
        return list(out)

    @property
    def state_summary(self) -> dict[str, int]:
        return {
            "bindings": len(self._bindings),
            "exact_keys": len(self._exact),
            "star_tries": len(self._by_length),
        }

    def _trie_for(self, words: list[str], *, create: bool) -> _Node | None:
        if HASH in words:
            return self._hash_root
        root = self._by_length.get(len(words))
        if root is None and create:
            root = self._by_length[len(words)] = _Node()
        return root

    @staticmethod
    def _node_for(root: _Node | None, words: list[str]) -> _Node:
        """The node at the end of `words`, creating the missing edges (`follow_down_create`)."""
        assert root is not None
        node = root
        for word in words:
            node = node.child(word) or node.add_child(word)
        return node

    @staticmethod
    def _find_node(root: _Node | None, words: list[str]) -> _Node | None:
        node = root
        for word in words:
            if node is None:
                return None
            node = node.child(word)
        return node

    def _count_rests(self, binding: Binding, words: list[str], delta: int) -> None:
        node = self._find_node(self._trie_for(words, create=False), words)
        for rest in reversed(_rests(words)):
            assert node is not None
            node.count_rest(rest, delta)
            node = node.parent

    def _forget(self, binding: Binding) -> None:
        words = split_topic_key(binding.key)
        if not has_wildcard(words):
            dests = self._exact[binding.key]
            _decrement(dests, binding.destination)
            if not dests:
                del self._exact[binding.key]
            return
        root = self._trie_for(words, create=False)
        node = self._find_node(root, words)
        if root is None or node is None:  # cannot happen while _bindings and the tries agree
            return
        _decrement(node.dests, binding.destination)
        self._count_rests(binding, words, -1)
        # Prune the now-useless tail of the path (`remove_path_if_empty`) so churn cannot grow a trie.
        while node.parent is not None and node.is_empty():
            parent = node.parent
            node.detach()
            node = parent
        if root is not self._hash_root and root.is_empty():
            del self._by_length[len(words)]


def _decrement(dests: dict[Destination, int], destination: Destination) -> None:
    count = dests.get(destination, 0)
    if count <= 1:
        dests.pop(destination, None)
    else:
        dests[destination] = count - 1
