"""YAML from users and from files someone sent, parsed within bounds: every config file, run ``config.yaml``,
``--set`` value and ``tune --space`` file goes through :func:`load`.

``yaml.safe_load`` runs no code, but it still has three ways to hang or crash on small input: an alias bomb
("billion laughs": nine lines that expand to 10^9 items, minutes of CPU and gigabytes when anything walks
the result), deep nesting (20,000 ``[`` are a RecursionError in its composer) and integers of more than
4,300 digits (a ValueError from Python's int). Here the text is scanned as a stream of events first (the
parser is iterative) for its length, nesting depth and aliases; the composed node graph is measured as
its expanded size (aliases counted every time they are used, without expanding them); only then is it
built. Each bound broken is a :class:`UserError` that says which and where.
"""

from __future__ import annotations

from typing import Any

import yaml

from rlpilot.common.bounds import MAX_NESTING as MAX_DEPTH  # one bound for every file rlpilot reads
from rlpilot.common.errors import UserError

MAX_CHARS = 1_000_000
"""Text longer than this is refused before parsing (a preset is ~2,000 characters)."""
MAX_ALIASES = 100
"""``*alias`` uses in one document (configs need none; a few shared values are fine)."""
MAX_NODES = 100_000
"""Values in the document once every alias is expanded (a preset has ~60)."""


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int], *, source: str) -> int:
    """Values under ``node`` with aliases expanded; memoised per node, so a bomb costs its node count."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise UserError(f"{source}: an alias refers to a value that contains it (a recursive YAML anchor)")
    size = 1
    if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
        open_nodes.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
        for child in children:
            size += _expanded_size(child, sizes, open_nodes, source=source)
            if size > MAX_NODES:
                break
        open_nodes.discard(key)
    sizes[key] = size
    return size


def _scan(text: str, source: str) -> None:
    """Bounds checked on the event stream (iterative: deep nesting cannot overflow the stack here)."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError(f"{source}: values nested more than {MAX_DEPTH} deep{_where(event)}")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise UserError(f"{source}: more than {MAX_ALIASES} YAML aliases (*name){_where(event)}")


def _where(event) -> str:
    mark = getattr(event, "start_mark", None)
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def load(text: str, *, source: str) -> Any:
    """``yaml.safe_load(text)`` within the bounds above. A bound broken is a :class:`UserError` naming
    ``source``; YAML syntax errors are left to the caller as :class:`yaml.YAMLError` (each says it its way)."""
    if len(text) > MAX_CHARS:
        raise UserError(f"{source} is {len(text):,} characters long: more than a config needs ({MAX_CHARS:,} at most)")
    _scan(text, source)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}, set(), source=source) > MAX_NODES:
            raise UserError(f"{source}: more than {MAX_NODES:,} values once its YAML aliases are expanded")
        try:
            return loader.construct_document(node)
        except ValueError as exc:  # Python's int refuses to read more than 4,300 digits
            if "digits" in str(exc):
                raise UserError(f"{source}: a number with more digits than any setting needs") from None
            raise UserError(f"{source}: a value cannot be read ({str(exc)[:120]})") from None
    finally:
        loader.dispose()
