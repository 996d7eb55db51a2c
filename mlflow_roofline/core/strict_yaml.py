"""One YAML reader for every file a user writes (sweep specs, import mappings): it means what it says.

PyYAML's ``safe_load`` reads YAML 1.1, whose plain scalars surprise: ``1:30`` is the
sexagesimal integer 90, ``1e-300`` a string (1.1 wants a dot in a float), ``yes``, ``no``,
``on`` and ``off`` booleans (``region: NO``, Norway, becomes False), ``010`` the octal 8,
``1_000`` the integer 1000 and ``2024-01-01`` a date; a key written twice keeps its last
value without a word; and an alias may stand for a node that holds aliases, so a
document of a few hundred bytes expands to billions of nodes (the "billion laughs").

:func:`load_yaml` reads with the YAML 1.2 core schema instead: only ``true``/``false``
(any case form of the spec) are booleans, only ``null``/``~``/empty is null, integers are
decimal (``0o`` octal and ``0x`` hex spelled out), floats are ``1.5``, ``1e-300``,
``.inf``, ``.nan``; everything else is the text written (``1:30``, ``yes``, ``NO``), which
the field's own check then accepts as text or refuses as not a number. A duplicate key is
an error naming both lines, merge keys (``<<``) are not read, and aliases may expand the
document by at most :data:`MAX_ALIAS_EXPANSION` nodes, counted on the composed node graph
before anything is built, so a hostile document is refused in milliseconds.
"""

from __future__ import annotations

import re

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from mlflow_roofline.core.errors import ConfigError

MAX_ALIAS_EXPANSION = 10_000
"""Nodes that aliases may add to a document beyond those written in it (its expanded size minus its own)."""

_DOCUMENT = "<document>"
"""The field of an error about the whole document, until :func:`load_yaml` names it."""

_CORE_SCHEMA: tuple[tuple[str, str, str], ...] = (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
)
"""The YAML 1.2 core schema's implicit tags: (tag, regular expression, first characters)."""


def _core_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for tag, pattern, first in _CORE_SCHEMA:
        for char in first:
            resolvers.setdefault(char, []).append((tag, re.compile(pattern)))
    resolvers.setdefault("", []).append(("tag:yaml.org,2002:null", re.compile(_CORE_SCHEMA[0][1])))
    return resolvers


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the YAML 1.2 core schema, no duplicate keys and bounded aliases."""

    yaml_implicit_resolvers = _core_resolvers()

    def compose_document(self) -> Node | None:
        """The document's node graph, refused when its aliases expand it past the bound."""
        node: Node | None = super().compose_document()
        if node is not None:
            _check_expansion(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[object, object]:
        """A mapping whose every key is written once (a second one is a ConfigError naming both lines)."""
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class refuses it
                continue
            if first is not None:
                raise ConfigError(
                    str(key),
                    f"is written twice in one mapping (lines {first} and {line}); YAML would keep only the last",
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _int(loader: StrictLoader, node: ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)  # leading zeros are decimal, as in YAML 1.2


StrictLoader.add_constructor("tag:yaml.org,2002:int", _int)


def _check_expansion(root: Node) -> None:
    """Refuse a node graph that aliases expand past :data:`MAX_ALIAS_EXPANSION` extra nodes, or a cyclic one.

    Sizes are counted bottom-up once per distinct node (memoised), so a billion-laughs
    document costs time in its written size, not in its expanded one.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            if size[key] - distinct > MAX_ALIAS_EXPANSION:
                raise ConfigError(
                    _DOCUMENT,
                    f"its anchors and aliases expand it by more than {MAX_ALIAS_EXPANSION:,} nodes; "
                    "write the values out or use the format's own defaults",
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigError(_DOCUMENT, "an alias refers to a node that contains it (a recursive document)")
        on_path.add(key)
        distinct += 1
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str, what: str = "yaml") -> object:
    """The data of one YAML document, read strictly (module docstring).

    Args:
        text: the document.
        what: the field an error about the whole document names (``spec``, ``mapping``).

    Raises:
        ConfigError: a duplicate key (naming the key), or an alias bomb or recursive alias (naming ``what``).
        yaml.YAMLError: text that is not YAML at all (callers name their file).
    """
    try:
        return yaml.load(text, Loader=StrictLoader)
    except ConfigError as exc:
        if exc.field == _DOCUMENT:
            raise ConfigError(what, exc.rule) from None
        raise
