"""The run-log schema: the one contract between components, simulator, views, checkers and Spark.

Every event is one flat row with the columns in :data:`FIELDS`; a column that does not apply to an
event's kind is null. Columns are typed once here and every reader and writer takes its types from
this module: :func:`arrow_schema` for Parquet and pandas, ``milvus_edu.analysis`` for Spark.

:data:`EVENT_KINDS` lists every kind with one line of meaning and the columns it fills, so the book's
"run log" chapter and the validation in :class:`~milvus_edu.events.Recorder` come from one table.

Versioning: :data:`SCHEMA_VERSION` goes up whenever a column is added or a meaning changes; it is
stored in each Parquet file's metadata and in ``summary.json``. Adding a kind does not change the
version (readers must tolerate kinds they do not know). Readers accept every version up to their
own (a column an older log lacks reads as null) and refuse a newer one in one line naming it.

* Version 1: the TSO's columns.
* Version 2: typed message-stream columns (``vchannel``, ``msg_id``, ``msg_type``, ``begin_ts``,
  ``end_ts``, ``min_ts``, ``max_ts``, ``tick_ts``) for TimeTick and the mechanisms after it; and pandas
  metadata in the Parquet file, so a plain ``pandas.read_parquet`` gives exact ``Int64`` timestamps.
* Version 3: ``segment``, the segment an event is about (DataNode syncs, DataCoord's segment meta,
  the insert messages that carry it), so analyses group rows and syncs by segment at scale.
* Version 4: ``request``, ``level`` and ``guarantee_ts`` for reads (a search or query from the client
  through the proxy to each shard delegator), so analyses group waits and staleness by consistency level.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 4

#: Wall-clock instant (Unix ms) of simulated time 0 in every simulated run: 2026-01-01T00:00:00Z.
#: Views print wall-clock values (``physical_ms``, ``window_end_ms``, ``clock_ms``, the physical part
#: of ``ts``) relative to it, signed, so a clock that is behind reads ``-00:00:15.000``.
SIM_EPOCH_MS = 1767225600000


@dataclass(frozen=True)
class Field:
    """One run-log column."""

    name: str
    type: str  # "string" | "int64" | "float64"
    nullable: bool
    doc: str


FIELDS: tuple[Field, ...] = (
    Field("run_id", "string", False, "Name of the run: scenario and seed, e.g. `tso-failover-s1`."),
    Field("seq", "int64", False, "Position of the event in the run, from 0; total order of the log."),
    Field("t_ms", "float64", False, "Simulated (true) time in milliseconds since the run started."),
    Field("node", "string", False, "Component instance that emitted the event, e.g. `rootcoord-1`, `client-0`."),
    Field("kind", "string", False, "What happened, `<area>.<verb>`; see the table of kinds."),
    Field("ts", "int64", True, "Hybrid timestamp the event is about (allocated, received, ...)."),
    Field("count", "int64", True, "How many timestamps a request or batch covers."),
    Field("physical_ms", "int64", True, "TSO state after the event: physical part of the in-memory window start (ms)."),
    Field("logical", "int64", True, "TSO state after the event: logical counter."),
    Field("window_end_ms", "int64", True, "TSO state after the event: last saved window end in the KV (ms)."),
    Field("clock_ms", "int64", True, "The emitting node's own wall clock when the event happened (ms since epoch)."),
    Field("active", "string", True, "Active rootcoord after the event (session events)."),
    Field("peer", "string", True, "The other party: the client of an allocation, the target of an RPC."),
    Field("channel", "string", True, "Physical channel (pchannel) the event is about, e.g. `by-dev-rootcoord-dml_0`."),
    Field("vchannel", "string", True, "Virtual channel (a collection's shard on a pchannel), e.g. "
          "`by-dev-rootcoord-dml_0_100v0`. (v2)"),
    Field("msg_id", "int64", True, "A message's id in its pchannel's log (its position); for a pack, the id "
          "its end position points at. (v2)"),
    Field("msg_type", "string", True, "Message type: `Insert`, `Delete`, `TimeTick`, `CreateCollection`, ... (v2)"),
    Field("begin_ts", "int64", True, "Begin timestamp of a message (its smallest row ts) or of a pack (the "
          "previous pack's end). (v2)"),
    Field("end_ts", "int64", True, "End timestamp of a message (its largest row ts) or of a pack (the time "
          "tick that closed it). (v2)"),
    Field("min_ts", "int64", True, "A proxy's pchannel statistics after the event: smallest ts of a DML task "
          "enqueued and not finished. (v2)"),
    Field("max_ts", "int64", True, "A proxy's pchannel statistics after the event: largest ts enqueued "
          "(never lowered while tasks remain). (v2)"),
    Field("tick_ts", "int64", True, "A time tick: the watermark a tick message, a proxy report or a "
          "consumed pack promises (nothing at or below it follows). (v2)"),
    Field("segment", "int64", True, "Segment id the event is about: an insert message's segment, a sync, "
          "DataCoord's record of it, the audit reading its binlogs back. (v3)"),
    Field("request", "int64", True, "Id of a read (search or query), the same on the client's, the proxy's and "
          "every delegator's events of that read. (v4)"),
    Field("level", "string", True, "Consistency level a read applied: `Strong`, `Session`, `Bounded`, "
          "`Eventually` or `Customized`. (v4)"),
    Field("guarantee_ts", "int64", True, "A read's guarantee timestamp: the QueryNode may serve it only once its "
          "tsafe reached this. (v4)"),
    Field("error", "string", True, "Error message when the step failed."),
    Field("detail", "string", True, "Anything else, as a JSON object with sorted keys."),
)

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
_BASE = {"run_id", "seq", "t_ms", "node", "kind"}


@dataclass(frozen=True)
class Kind:
    """One event kind: its meaning and the optional columns it fills."""

    name: str
    doc: str
    fields: tuple[str, ...]
    go: str  # the Milvus Go function the event comes from


def kind(name: str, doc: str, fields: str, go: str) -> Kind:
    """A :class:`Kind` from a space-separated list of the columns it fills."""
    return Kind(name, doc, tuple(fields.split()), go)


#: The kinds every run may hold, whatever the mechanism: the run's start and end, faults, the network.
#: Each mechanism adds its own kinds when it registers (:func:`register_kinds`,
#: :mod:`milvus_edu.registry`), so this dict holds every known kind once ``milvus_edu`` is imported.
EVENT_KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        kind("run.start", "The run began; `detail` holds scenario, seed, switches, and the options and parameters "
             "that differ from the defaults.", "detail", "-"),
        kind("run.end", "The run ended; `detail` holds the event count.", "detail", "-"),
        kind("run.clock", "A run on a real Milvus server (`milvus_edu.real`): `clock_ms` is the wall clock (Unix ms) "
             "at this event's `t_ms`, so views place the real hybrid timestamps' physical parts on the run's time "
             "axis; `detail` names the server (version, uri, start seconds, resident MiB).", "clock_ms detail", "-"),
        kind("fault.kill", "A node was killed (no graceful stop, no lease revoke).", "detail", "-"),
        kind("fault.pause", "A node froze (a long GC or VM pause): it runs nothing until it resumes.", "detail", "-"),
        kind("fault.resume", "A paused node runs again, unaware that time passed.", "detail", "-"),
        kind("fault.stall", "One loop of a node stops making progress for `detail.duration_ms` (a hung RPC, a "
             "deadlock); the node itself stays up.", "detail", "-"),
        kind("fault.restart", "A killed node starts again with a new server id and fresh state.", "detail", "-"),
        kind("fault.clock_jump", "A node's wall clock jumped by `detail.delta_ms`.", "clock_ms detail", "-"),
        kind("fault.switch", "A bug switch was flipped part-way (a `SetSwitch` intervention): `detail.switch` names "
             "it, `detail.on` says whether it is on from now on, for every component.", "detail", "-"),
        kind("rpc.drop", "The network lost an RPC message.", "peer detail", "-"),
    )
}


def register_kinds(kinds) -> None:
    """Add a mechanism's kinds to :data:`EVENT_KINDS`; ``ValueError`` for a clash or an unknown column."""
    known = set(FIELD_NAMES)
    for k in kinds:
        if k.name in EVENT_KINDS and EVENT_KINDS[k.name] != k:
            raise ValueError(f"event kind {k.name!r} is already defined differently")
        bad = [f for f in k.fields if f not in known]
        if bad:
            raise ValueError(f"event kind {k.name!r} names unknown column(s) {bad}; add them to FIELDS")
    for k in kinds:
        EVENT_KINDS[k.name] = k


def validate_kind(kind: str, fields: dict) -> None:
    """Raise ``ValueError`` when ``kind`` is unknown or ``fields`` names a column it does not fill."""
    spec = EVENT_KINDS.get(kind)
    if spec is None:
        raise ValueError(f"unknown event kind {kind!r}; a mechanism declares its kinds in its Mechanism(kinds=...)")
    extra = set(fields) - set(spec.fields) - _BASE
    if extra:
        raise ValueError(f"event kind {kind!r} does not carry {sorted(extra)}; allowed: {list(spec.fields)}")


_ARROW = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}
_PANDAS = {"string": "string", "int64": "Int64", "float64": "float64"}


def detail_object(raw) -> dict:
    """The JSON object a ``detail`` text holds; ``{}`` when it is None, empty, not JSON, or not a JSON object."""
    if raw is None or not isinstance(raw, str) or not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _pandas_metadata() -> bytes:
    """The ``pandas`` schema metadata that makes a plain ``pandas.read_parquet`` use nullable ``Int64``.

    Without it pandas turns an int64 column with nulls into float64, which silently rounds hybrid
    timestamps to multiples of 64. Written by hand (no library versions in it), so run files do not
    change with the installed pandas.
    """
    numpy_type = {"string": "string", "int64": "Int64", "float64": "float64"}
    pandas_type = {"string": "unicode", "int64": "int64", "float64": "float64"}
    columns = [{"name": f.name, "field_name": f.name, "pandas_type": pandas_type[f.type],
                "numpy_type": numpy_type[f.type], "metadata": None} for f in FIELDS]
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": columns, "attributes": {}},
                      separators=(",", ":")).encode()


def arrow_schema() -> pa.Schema:
    """The Arrow schema of a run log, with the schema version and the pandas dtypes in its metadata."""
    return pa.schema(
        [pa.field(f.name, _ARROW[f.type], nullable=f.nullable) for f in FIELDS],
        metadata={b"milvus_edu.schema_version": str(SCHEMA_VERSION).encode(), b"pandas": _pandas_metadata()},
    )


def pandas_dtypes() -> dict[str, str]:
    """Column -> pandas dtype (nullable integers, string dtype)."""
    return {f.name: _PANDAS[f.type] for f in FIELDS}
