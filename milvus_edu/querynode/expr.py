"""The filter expressions a search or query may carry, on the primary key ``id``.

Models the part of Milvus's expression language (``internal/parser/planparserv2``) a consistency lesson needs:
``id in [...]``, ``id not in [...]``, ``id == v``, ``id != v`` and the empty filter (every row).

Simplification: no other fields, operators or functions; values are Python literals.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

PK_FIELD = "id"
_FILTER = re.compile(r"^\s*id\s*(==|!=|not\s+in|in)\s*(.+?)\s*$", re.S)


def parse_filter(expr: str | None) -> Callable[[object], bool]:
    """A filter expression as a predicate ``pk -> bool``; ``ValueError`` in one line for anything unsupported."""
    if expr is None or not str(expr).strip():
        return lambda pk: True
    m = _FILTER.match(str(expr))
    if not m:
        raise ValueError(f"filter {expr!r} is not supported; use id in [...], id not in [...], id == v or id != v")
    op, literal = m.group(1), m.group(2)
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        raise ValueError(f"filter {expr!r}: {literal!r} is not a literal value") from None
    if "in" in op:
        if not isinstance(value, (list, tuple, set)):
            raise ValueError(f"filter {expr!r}: 'in' needs a list, e.g. id in [\"A1\", \"A2\"]")
        members = set(value)
        return (lambda pk: pk not in members) if op.startswith("not") else (lambda pk: pk in members)
    return (lambda pk: pk == value) if op == "==" else (lambda pk: pk != value)


def read_predicate(expr: str | None = None, ids=None) -> Callable[[object], bool]:
    """The rows a read asks for: its ``filter`` and, when given, its ``ids`` (both must hold)."""
    pred = parse_filter(expr)
    if ids is None:
        return pred
    wanted = set(ids if isinstance(ids, (list, tuple, set)) else [ids])
    return lambda pk: pk in wanted and pred(pk)
