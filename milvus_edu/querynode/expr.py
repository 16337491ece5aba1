"""The filter expressions a search, query or delete may carry: the part of Milvus's boolean expression language
(``internal/parser/planparserv2``: ``Plan.g4``, ``parser_visitor.go``, ``utils.go``) a learner writes with pymilvus.

The grammar, loosest binding first (as ``Plan.g4`` orders its alternatives)::

    expr     := and_expr  (("or" | "OR" | "||") and_expr)*
    and_expr := unary     (("and" | "AND" | "&&") unary)*
    unary    := ("not" | "NOT" | "!") unary | compare
    compare  := "(" expr ")"
              | value ("<" | "<=") field ("<" | "<=") value        # a range (VisitRange)
              | value (">" | ">=") field (">" | ">=") value        # a reverse range (VisitReverseRange)
              | operand ("==" | "!=" | "<" | "<=" | ">" | ">=") operand   # one side a field, the other a value
              | field ["not" | "NOT"] ("in" | "IN") "[" [value ("," value)* [","]] "]"
              | field ("like" | "LIKE") string
    value    := integer | float | string | "true" | "false" (also True/TRUE, False/FALSE) | "-" number

Strings take single or double quotes with backslash escapes; ``like`` takes ``%`` (any run) and ``_`` (one
character), ``\\%`` and ``\\_`` for the characters themselves.

Fields follow a collection made the way ``MilvusClient.create_collection(name, dimension=...)`` makes one (the
"quick setup"): the primary key ``id``, a vector, and the dynamic field ``$meta`` on. Any other name is a key of a
row's dynamic field (``translateIdentifier`` -> ``GetFieldFromNameDefaultJSON``), so naming a key no row has is
not an error. A row that lacks the key, or holds a value of another type (a string where the filter has a
number), fails every comparison, ``in`` and ``like`` on it, except ``!=``, which it passes (segcore's
``UnaryRangeJSONCompare`` / ``UnaryRangeJSONCompareNotEqual``); ``not`` and ``not in`` negate that. The primary key's type is checked as ``HandleCompare`` / ``canBeCompared`` check it: with
``pk_type`` given (``"Int64"`` or ``"VarChar"``), ``id == 5`` on a VarChar key is refused with Milvus's
``comparisons between VarChar and Int64 are not supported``; ``like`` on an Int64 key with
``like operation on non-string or no-json field is unsupported``.

Simplification: no arithmetic, functions (``json_contains``, ``array_contains``, ``text_match``…),
``exists``, ``is null``, template values, JSON paths (``meta["a"]["b"]``) or field-to-field comparisons; booleans
are never ordered (``<`` on them is false); ``not`` binds as in ``Plan.g4`` (tighter than a comparison), so ``not id == 1`` is refused
and ``not (id == 1)`` is what to write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

PK_FIELD = "id"
#: The quick-setup vector field: a row's value for it is the vector, not a dynamic key.
VECTOR_FIELD = "vector"
PK_TYPES = ("Int64", "VarChar")

_OR = {"or", "OR", "||"}
_AND = {"and", "AND", "&&"}
_NOT = {"not", "NOT", "!"}
_IN = {"in", "IN"}
_LIKE = {"like", "LIKE"}
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE"}
_CMP = ("==", "!=", "<=", ">=", "<", ">")
_INT64_MAX = 2**63 - 1
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\],-])
  | (?P<name>[A-Za-z_$][A-Za-z0-9_]*)
""", re.X | re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


@dataclass(frozen=True)
class _Tok:
    kind: str  # num, str, op, name, end
    text: str
    col: int  # 1-based column of the token's first character
    value: object = None


# ---------------------------------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class Compare:
    """``field op value`` (a literal on the left is turned round first, as ``reverseOrder`` does)."""

    field: str
    op: str
    value: object


@dataclass(frozen=True)
class Term:
    """``field in [values]`` (``not in`` is ``Not(Term)``, as ``VisitTerm`` builds it)."""

    field: str
    values: tuple


@dataclass(frozen=True)
class Like:
    """``field like pattern``, the pattern compiled to a full-match regular expression."""

    field: str
    pattern: str
    regex: re.Pattern


@dataclass(frozen=True)
class Not:
    """``not child``."""

    child: object


@dataclass(frozen=True)
class Logical:
    """``left and/or right``."""

    op: str  # "and" | "or"
    left: object
    right: object


class _Value:
    """A literal as the parser met it: its value and the column it starts at (for a type error's message)."""

    __slots__ = ("value", "col")

    def __init__(self, value, col: int):
        self.value = value
        self.col = col


def _type_name(value) -> str:
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, int):
        return "Int64"
    if isinstance(value, float):
        return "Double"
    return "VarChar"


# ---------------------------------------------------------------------------------------------- the parser


class _Parser:
    """A recursive-descent parser over the token list; every error names the column and what was expected."""

    def __init__(self, text: str, pk_type: str | None):
        self.text = text
        self.pk_type = pk_type
        self.toks = self._tokenize(text)
        self.i = 0

    def _fail(self, col: int, what: str):
        raise ValueError(f"filter {self.text!r}: {what} at column {col}")

    def _tokenize(self, text: str) -> list[_Tok]:
        toks, pos = [], 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                self._fail(pos + 1, f"unexpected character {text[pos]!r}")
            kind = m.lastgroup
            if kind != "ws":
                toks.append(_Tok(kind, m.group(), pos + 1, self._literal(kind, m.group(), pos + 1)))
            pos = m.end()
        toks.append(_Tok("end", "", len(text) + 1))
        return toks

    def _literal(self, kind: str, text: str, col: int):
        if kind == "num":
            if any(c in text for c in ".eE") and text[:2] not in ("0x", "0X"):
                return float(text)
            # Plan.g4's IntegerConstant: hexadecimal 0x.., octal 0.. (as C writes them), decimal
            try:
                value = int(text, 16) if text[:2] in ("0x", "0X") else int(text, 8) if text[0] == "0" else int(text)
            except ValueError:
                self._fail(col, f"{text} is not a number (a leading 0 makes it octal)")
            if value > _INT64_MAX:  # the lexer's strconv.ParseInt fails before any minus sign is applied
                self._fail(col, f"the integer {text} is out of the Int64 range")
            return value
        if kind == "str":
            out, body, k = [], text[1:-1], 0
            while k < len(body):
                c = body[k]
                if c == "\\":
                    nxt = body[k + 1]
                    out.append(_ESCAPES.get(nxt, "\\" + nxt))  # \% and \_ stay escaped for like
                    k += 2
                else:
                    out.append(c)
                    k += 1
            return "".join(out)
        return None

    # ---- token helpers

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def _describe(self, tok: _Tok) -> str:
        return "the end" if tok.kind == "end" else repr(tok.text)

    def _take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def _is(self, words) -> bool:
        t = self.tok
        return t.kind in ("op", "name") and t.text in words

    # ---- grammar

    def parse(self):
        node = self._or()
        if self.tok.kind != "end":
            self._fail(self.tok.col, f"expected 'and', 'or' or the end, got {self._describe(self.tok)}")
        return node

    def _or(self):
        node = self._and()
        while self._is(_OR):
            self._take()
            node = Logical("or", node, self._and())
        return node

    def _and(self):
        node = self._unary()
        while self._is(_AND):
            self._take()
            node = Logical("and", node, self._unary())
        return node

    def _unary(self):
        if self._is(_NOT):
            op = self._take()
            if self.tok.kind == "op" and self.tok.text == "(" or self._is(_NOT):
                return Not(self._unary())
            self._fail(op.col, f"'{op.text}' applies to a boolean expression in parentheses, "
                               f"e.g. {op.text} ({PK_FIELD} == 1)")
        return self._compare()

    def _compare(self):
        tok = self.tok
        if tok.kind == "op" and tok.text == "(":
            self._take()
            node = self._or()
            if not (self.tok.kind == "op" and self.tok.text == ")"):
                self._fail(self.tok.col, f"expected ')' to close the '(' at column {tok.col}, "
                                         f"got {self._describe(self.tok)}")
            self._take()
            return node
        left = self._operand()
        if isinstance(left, str) and self._is(_NOT | _IN):
            negated = self._is(_NOT)
            if negated:
                self._take()
                if not self._is(_IN):
                    self._fail(self.tok.col, f"expected 'in' after 'not', got {self._describe(self.tok)}")
            self._take()
            return self._term(left, negated)
        if isinstance(left, str) and self._is(_LIKE):
            self._take()
            return self._like(left)
        op = self.tok
        if not (op.kind == "op" and op.text in _CMP):
            what = f"field {left!r}" if isinstance(left, str) else "the value"
            self._fail(op.col, f"expected a comparison (== != < <= > >=), 'in', 'not in' or 'like' after {what}, "
                               f"got {self._describe(op)}")
        self._take()
        right = self._operand(after=op.text)
        nxt = self.tok
        if nxt.kind == "op" and nxt.text in _CMP:
            return self._range(left, op, right, nxt)
        return self._relation(left, op, right)

    def _operand(self, after: str | None = None):
        """A field name (returned as ``str``) or a literal (a :class:`_Value`)."""
        tok = self.tok
        expected = f"expected a value after '{after}'" if after else "expected a field or a value"
        if tok.kind == "name":
            if tok.text in _TRUE or tok.text in _FALSE:
                self._take()
                return _Value(tok.text in _TRUE, tok.col)
            if tok.text in _OR | _AND | _NOT | _IN | _LIKE:
                self._fail(tok.col, f"{expected}, got the keyword {tok.text!r}")
            self._take()
            return tok.text
        if tok.kind in ("num", "str"):
            self._take()
            return _Value(tok.value, tok.col)
        if tok.kind == "op" and tok.text == "-":
            self._take()
            num = self.tok
            if num.kind != "num":
                self._fail(num.col, f"expected a number after '-', got {self._describe(num)}")
            self._take()
            return _Value(-num.value, tok.col)
        self._fail(tok.col, f"{expected}, got {self._describe(tok)}")

    def _value(self, what: str) -> _Value:
        v = self._operand(after=what)
        if isinstance(v, str):
            self._fail(self.toks[self.i - 1].col, f"expected a value, not the field {v!r}")
        return v

    def _check_pk(self, field: str, value: _Value, op: str) -> None:
        """``HandleCompare``'s ``canBeCompared`` then ``castValue`` for the primary key (a dynamic key compares
        with anything): an Int64 key takes whole numbers only, a VarChar key strings only."""
        if field != PK_FIELD or self.pk_type is None:
            return
        kind = _type_name(value.value)
        if kind == self.pk_type:
            return
        if self.pk_type == "Int64" and kind == "Double":
            raise ValueError(f"filter {self.text!r}: cannot cast value to Int64, value: {value.value} "
                             f"(column {value.col}, after '{op}')")
        raise ValueError(f"filter {self.text!r}: comparisons between {self.pk_type} and {kind} are not "
                         f"supported (column {value.col}, after '{op}')")

    def _relation(self, left, op: _Tok, right):
        if isinstance(left, str) == isinstance(right, str):
            what = "two fields" if isinstance(left, str) else "two values"
            self._fail(op.col, f"'{op.text}' compares a field with a value, not {what}")
        if isinstance(left, str):
            field, value, cmp = left, right, op.text
        else:  # reverseOrder: 5 < age is age > 5
            field, value, cmp = right, left, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op.text, op.text)
        self._check_pk(field, value, op.text)
        return Compare(field, cmp, value.value)

    def _range(self, low, op1: _Tok, mid, op2: _Tok):
        """``VisitRange`` / ``VisitReverseRange``: ``a < x <= b`` or ``b > x >= a``, ``x`` a field."""
        self._take()
        high = self._value(op2.text)
        up, down = {"<", "<="}, {">", ">="}
        if not (op1.text in up and op2.text in up or op1.text in down and op2.text in down):
            self._fail(op2.col, f"a range takes two of < <= or two of > >= (e.g. 1 < {PK_FIELD} <= 5), "
                                f"got '{op1.text}' then '{op2.text}'")
        if not isinstance(mid, str):
            self._fail(op1.col, "a range needs a field between its bounds, e.g. 1 < age <= 5")
        if isinstance(low, str):
            self._fail(op1.col, f"the bound before '{op1.text}' must be a value, not the field {low!r}")
        self._check_pk(mid, low, op1.text)
        self._check_pk(mid, high, op2.text)
        # 1 < x <= 5 is x > 1 and x <= 5; 5 > x >= 1 is x < 5 and x >= 1
        turned = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op1.text]
        return Logical("and", Compare(mid, turned, low.value), Compare(mid, op2.text, high.value))

    def _term(self, field: str, negated: bool):
        """``VisitTerm``: the right side must be a list of values, each castable to the field's type."""
        tok = self.tok
        if not (tok.kind == "op" and tok.text == "["):
            self._fail(tok.col, f"expected a list after 'in', e.g. {field} in [1, 2], got {self._describe(tok)}")
        self._take()
        values = []
        while not (self.tok.kind == "op" and self.tok.text == "]"):
            v = self._value("[" if not values else ",")
            if field == PK_FIELD and self.pk_type is not None:
                if _type_name(v.value) != self.pk_type:
                    raise ValueError(f"filter {self.text!r}: value '{v.value}' in list cannot be casted to "
                                     f"{self.pk_type} (column {v.col})")
            values.append(v.value)
            if self.tok.kind == "op" and self.tok.text == ",":
                self._take()
            elif not (self.tok.kind == "op" and self.tok.text == "]"):
                self._fail(self.tok.col, f"expected ',' or ']' in the list, got {self._describe(self.tok)}")
        self._take()
        term = Term(field, tuple(values))
        return Not(term) if negated else term

    def _like(self, field: str):
        """``VisitLike``: a string pattern on a string field (or a dynamic key)."""
        tok = self.tok
        if tok.kind != "str":
            self._fail(tok.col, f"expected a quoted pattern after 'like', e.g. {field} like \"A%\", "
                                f"got {self._describe(tok)}")
        self._take()
        if field == PK_FIELD and self.pk_type == "Int64":
            raise ValueError(f"filter {self.text!r}: like operation on non-string or no-json field is unsupported")
        return Like(field, tok.value, _like_regex(tok.value))


def _like_regex(pattern: str) -> re.Pattern:
    """``%`` any run, ``_`` one character, ``\\%`` / ``\\_`` the characters themselves."""
    out, k = [], 0
    while k < len(pattern):
        c = pattern[k]
        if c == "\\" and k + 1 < len(pattern) and pattern[k + 1] in "%_":
            out.append(re.escape(pattern[k + 1]))
            k += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        k += 1
    return re.compile("".join(out), re.S)


# ---------------------------------------------------------------------------------------------- evaluation


_MISSING = object()


def _same_kind(a, b) -> bool:
    """Whether Milvus compares the two values at all: numbers with numbers, strings with strings, bools with bools."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    return isinstance(a, str) and isinstance(b, str)


def _cmp(op: str, a, b) -> bool:
    if not _same_kind(a, b):  # UnaryRangeJSONCompare: false, but true for != (UnaryRangeJSONCompareNotEqual)
        return op == "!="
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if isinstance(a, bool):  # Milvus orders no booleans
        return False
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def evaluate(node, pk, fields: Mapping | None) -> bool:
    """Whether the row with primary key ``pk`` and dynamic fields ``fields`` matches the parsed ``node``."""
    if isinstance(node, Logical):
        if node.op == "and":
            return evaluate(node.left, pk, fields) and evaluate(node.right, pk, fields)
        return evaluate(node.left, pk, fields) or evaluate(node.right, pk, fields)
    if isinstance(node, Not):
        return not evaluate(node.child, pk, fields)
    value = pk if node.field == PK_FIELD else (fields or {}).get(node.field, _MISSING)
    if value is _MISSING:  # a key the row lacks: as a value of another type
        return isinstance(node, Compare) and node.op == "!="
    if isinstance(node, Compare):
        return _cmp(node.op, value, node.value)
    if isinstance(node, Term):
        return any(_cmp("==", value, v) for v in node.values)
    return isinstance(value, str) and node.regex.fullmatch(value) is not None


def fields_of(node) -> set[str]:
    """The field names ``node`` reads."""
    if node is None:
        return set()
    if isinstance(node, Logical):
        return fields_of(node.left) | fields_of(node.right)
    if isinstance(node, Not):
        return fields_of(node.child)
    return {node.field}


class Filter:
    """A parsed filter: call it as ``pred(pk, fields=None)``; ``node`` is the tree (None for the empty filter) and
    ``ids``, when given, the keys a read also restricts itself to."""

    def __init__(self, node, ids=None):
        self.node = node
        self.ids = None if ids is None else frozenset(ids)
        #: whether the filter reads a dynamic key (a caller holding only primary keys cannot evaluate it)
        self.reads_fields = bool(fields_of(node) - {PK_FIELD})

    def __call__(self, pk, fields: Mapping | None = None) -> bool:
        if self.ids is not None and pk not in self.ids:
            return False
        return True if self.node is None else evaluate(self.node, pk, fields)


def parse_filter(expr: str | None, pk_type: str | None = None) -> Filter:
    """A filter expression as a predicate ``(pk, fields) -> bool``; ``ValueError`` in one line naming the column and
    what was expected. ``pk_type`` (``"Int64"`` / ``"VarChar"``), when known, type-checks the primary key."""
    if pk_type is not None and pk_type not in PK_TYPES:
        raise ValueError(f"pk_type must be one of {', '.join(PK_TYPES)}, got {pk_type!r}")
    if expr is None or not str(expr).strip():
        return Filter(None)
    if not isinstance(expr, str):
        raise ValueError(f"a filter is a string such as 'id in [1, 2]', got {type(expr).__name__}")
    return Filter(_Parser(expr, pk_type).parse())


def pk_type_of(pks) -> str | None:
    """The primary key type a collection's keys give (``Int64`` for ints, ``VarChar`` for strings), or None."""
    for pk in pks:
        if isinstance(pk, str):
            return "VarChar"
        if isinstance(pk, int) and not isinstance(pk, bool):
            return "Int64"
    return None


def read_predicate(expr: str | None = None, ids=None, pk_type: str | None = None) -> Filter:
    """The rows a read asks for: its ``filter`` and, when given, its ``ids`` (both must hold); called as
    ``pred(pk, fields=None)``."""
    node = parse_filter(expr, pk_type).node
    if ids is None:
        return Filter(node)
    return Filter(node, ids if isinstance(ids, (list, tuple, set)) else [ids])
