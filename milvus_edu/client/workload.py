"""A workload: the client program a scenario, a learner or a real server runs, as plain data.

A workload is a list of steps; each step is one call of pymilvus's ``MilvusClient`` (``create_collection``,
``insert``, ``delete``, ``flush``, ``search``, ``query``, ``drop_collection``) by one client at a time. The simulated
cluster (the ``workload`` scenario and its kin) and a real Milvus (:mod:`milvus_edu.real`) run the same steps.

This module is the one place the names of pymilvus's operations are spelled (:data:`OPS`, :data:`READ_OPS`,
:data:`KIND_OF_OP`); other shared modules use these constants (some of the names are also lessons' names).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass, field

from ..proto import ConsistencyLevel
from ..querynode.expr import PK_FIELD, VECTOR_FIELD, parse_filter, pk_type_of

OPS = ("create_collection", "insert", "delete", "flush", "search", "query", "drop_collection")
#: The ops that read (a search or a query); each logs ``client.read`` when it returns.
READ_OPS = ("search", "query")
#: Which ``client.*`` kind each op logs when it returns (a flush logs ``client.flush`` twice: called and flushed).
KIND_OF_OP = {"create_collection": "client.create_collection", "drop_collection": "client.drop_collection",
              "insert": "client.insert", "delete": "client.delete", "flush": "client.flush",
              **{op: "client.read" for op in READ_OPS}}


# ---------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Step:
    """One client call of a workload: at ``at`` simulated seconds (or when ``client``'s previous call returned,
    whichever is later), ``client`` calls ``op`` on ``collection`` with ``args`` (pymilvus's keyword arguments)."""

    at: float
    client: str
    op: str
    collection: str
    args: dict = field(default_factory=dict)
    label: str = ""


_STEP_KEYS = {"at", "client", "op", "collection", "label"}
_OP_ARGS = {
    "create_collection": {"consistency_level", "shards_num"},
    "drop_collection": set(),
    "insert": {"data", "ids"},
    "delete": {"ids", "filter"},
    "flush": set(),
    "search": {"consistency_level", "guarantee_timestamp", "filter", "ids", "limit", "timeout", "data",
               "output_fields"},
    "query": {"consistency_level", "guarantee_timestamp", "filter", "ids", "limit", "timeout", "output_fields"},
}


def warn_steps_after(steps: list[Step], until_ms: float | None) -> None:
    """Warn (``UserWarning``) when some of a workload's ``steps`` are at or after the run's end ``until_ms``: they
    never run, and a workload whose times were meant as milliseconds (``at`` is in seconds) looks like this."""
    if until_ms is None:
        return
    late = [s for s in steps if isinstance(s.at, (int, float)) and s.at * 1000.0 >= until_ms]
    if late:
        verb = "is" if len(late) == 1 else "are"
        warnings.warn(f"{len(late)} of the workload's {len(steps)} steps {verb} at or after the run's end "
                      f"({until_ms / 1000:g} s), the first at {late[0].at:g} s, and will not run; a step's at is in "
                      "seconds: give a longer duration or earlier times", UserWarning, stacklevel=3)


def parse_steps(steps) -> list[Step]:
    """Check a workload and return it as :class:`Step` records.

    Each step is a :class:`Step` or a dict with ``at`` (seconds), ``client``, ``op`` (one of :data:`OPS`),
    ``collection`` and the op's keyword arguments (``data`` / ``ids`` for insert: ``data`` is rows such as
    ``{"id": "A1", "age": 30, "color": "red"}``, whose keys besides ``id`` and ``vector`` are kept as the row's
    dynamic field; ``ids`` or ``filter`` for delete,
    ``consistency_level``, ``guarantee_timestamp``, ``filter``, ``ids``, ``limit``, ``timeout``, ``output_fields``
    for search and query). ``ValueError`` in one line for an unknown op or argument, insert rows without an ``id``
    (or with a dynamic field that is not JSON), an unknown level, a bad
    guarantee timestamp, a time that is not finite, a ``timeout`` or ``limit`` that is not positive, a filter that
    does not parse or compares the primary key with a value of another type (the key's type is the one the workload
    inserts into that collection), or times that go backwards.
    """
    out: list[Step] = []
    last = 0.0
    for i, raw in enumerate(steps, 1):
        if isinstance(raw, Step):
            step = raw
        elif isinstance(raw, dict):
            missing = [k for k in ("at", "client", "op", "collection") if k not in raw]
            if missing:
                raise ValueError(f"step {i} has no {missing[0]!r}; a step needs at, client, op and collection")
            args = {k: v for k, v in raw.items() if k not in _STEP_KEYS}
            step = Step(raw["at"], str(raw["client"]), str(raw["op"]), str(raw["collection"]), args,
                        str(raw.get("label", "")))
        else:
            raise ValueError(f"step {i} is a value of type {type(raw).__name__}; give a dict or a Step")
        if step.op not in OPS:
            raise ValueError(f"step {i}: unknown op {step.op!r}; use one of {', '.join(OPS)}")
        extra = sorted(set(step.args) - _OP_ARGS[step.op])
        if extra:
            allowed = ", ".join(sorted(_OP_ARGS[step.op])) or "none"
            raise ValueError(f"step {i}: {step.op} takes no argument {extra[0]!r}; it takes {allowed}")
        if isinstance(step.at, bool) or not isinstance(step.at, (int, float)) or not 0 <= step.at < float("inf"):
            raise ValueError(f"step {i}: at must be a finite, non-negative number of seconds, got {step.at!r}")
        if step.at < last:
            raise ValueError(f"step {i} is at {step.at} s, before the step above it ({last} s); list steps in time order")
        last = step.at
        if "consistency_level" in step.args:
            ConsistencyLevel.parse(step.args["consistency_level"])
        if "guarantee_timestamp" in step.args:
            check_guarantee_timestamp(step.args["guarantee_timestamp"])
        timeout, limit = step.args.get("timeout"), step.args.get("limit")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout < float("inf")):
            raise ValueError(f"step {i}: timeout must be a positive number of seconds, got {timeout!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"step {i}: limit must be a whole number of rows, 1 or more, got {limit!r}")
        if step.op == "insert" or "ids" in step.args:  # pymilvus checks the rows before it sends anything
            try:
                rows_of(step.args)
            except ValueError as exc:
                raise ValueError(f"step {i}: {exc}") from None
        out.append(step)
    pk_types = _pk_types(out)
    for i, step in enumerate(out, 1):
        if "filter" in step.args:
            try:
                parse_filter(step.args["filter"], pk_types.get(step.collection))
            except ValueError as exc:
                raise ValueError(f"step {i}: {exc}") from None
    return out


def _pk_types(steps: list[Step]) -> dict[str, str]:
    """Each collection's primary key type, from the keys the workload inserts into it (the schema a real
    collection would be created with); a collection with no insert is left out."""
    keys: dict[str, list] = {}
    for step in steps:
        if step.op == "insert":
            keys.setdefault(step.collection, []).extend(rows_of(step.args)[0])  # checked by parse_steps
    return {name: t for name, pks in keys.items() if (t := pk_type_of(pks)) is not None}


def check_guarantee_timestamp(value) -> int:
    """A user's ``guarantee_timestamp`` as an int; ``ValueError`` unless it is a whole number in [0, 2**64)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise ValueError(f"guarantee_timestamp must be a hybrid timestamp (a whole number from 0 to 2**64 - 1), "
                         f"got {value!r}")
    return value


def pks_of(args: dict) -> list:
    """An insert's (or a read's ``ids``) primary keys."""
    return rows_of(args)[0]


def rows_of(args: dict) -> tuple[list, list | None]:
    """An insert's (or a read's ``ids``) primary keys and each row's dynamic field: its keys besides ``id`` and
    ``vector`` (None when no row has any, so rows of bare keys travel exactly as before)."""
    if "ids" in args:
        ids = args["ids"]
        return (list(ids) if isinstance(ids, (list, tuple)) else [ids]), None
    data = args.get("data") or []
    if isinstance(data, dict):
        data = [data]
    try:
        pks = [row[PK_FIELD] for row in data]
    except (KeyError, TypeError):
        raise ValueError(f"insert data must be rows with an {PK_FIELD!r} field, e.g. [{{'id': 'A1'}}]") from None
    fields = [{k: v for k, v in row.items() if k not in (PK_FIELD, VECTOR_FIELD)} for row in data]
    for row in fields:
        for key, value in row.items():
            if not _json_value(value):
                raise ValueError(f"insert data: field {key!r} holds a value of type {type(value).__name__}; a dynamic field "
                                 f"takes numbers, strings, booleans, None, lists and dicts (JSON)")
    return pks, (fields if any(fields) else None)


def _json_value(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False


# ---------------------------------------------------------------------------------------------- the example

#: The design documents' example starts at its t0 once rootcoord serves.
T0_S = 0.5  # the table's t0, once rootcoord serves
UNIT_S = 0.1  # one step of the table's clock: t2 is 200 ms after t0

#: The design documents' table (book/seeds.md, "Guarantee timestamps, tsafe and MVCC"): Client1 writes, Client2 reads at Strong, one table unit = 100 ms, so
#: a write and the next read are 200 ms apart, about one time-tick interval. Then Client1 flushes and reads again,
#: served from the sealed segment loaded from the binlogs.
SEED_STEPS = (
    {"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0", "label": "t0"},
    {"at": T0_S + 2 * UNIT_S, "client": "Client2", "op": "search", "collection": "C0", "consistency_level": "Strong",
     "label": "t2"},
    {"at": T0_S + 4 * UNIT_S, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A1"}],
     "label": "t4"},
    {"at": T0_S + 6 * UNIT_S, "client": "Client2", "op": "search", "collection": "C0", "consistency_level": "Strong",
     "label": "t6"},
    {"at": T0_S + 8 * UNIT_S, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A2"}],
     "label": "t8"},
    {"at": T0_S + 10 * UNIT_S, "client": "Client2", "op": "search", "collection": "C0", "consistency_level": "Strong",
     "label": "t10"},
    {"at": T0_S + 12 * UNIT_S, "client": "Client1", "op": "delete", "collection": "C0", "ids": ["A1"], "label": "t12"},
    {"at": T0_S + 14 * UNIT_S, "client": "Client2", "op": "search", "collection": "C0", "consistency_level": "Strong",
     "label": "t14"},
    {"at": T0_S + 16 * UNIT_S, "client": "Client1", "op": "flush", "collection": "C0", "label": "t16"},
    {"at": T0_S + 18 * UNIT_S, "client": "Client1", "op": "search", "collection": "C0", "consistency_level": "Strong",
     "label": "after flush"},
)
