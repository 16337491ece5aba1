"""The run-log schema: the one contract between components, simulator, views, checkers and Spark.

Every event is one flat row with the columns in :data:`FIELDS`; a column that does not apply to an
event's kind is null. Columns are typed once here and every reader and writer takes its types from
this module: :func:`arrow_schema` for Parquet and pandas, ``milvus_edu.analysis`` for Spark.

:data:`EVENT_KINDS` lists every kind with one line of meaning and the columns it fills, so the book's
"run log" chapter and the validation in :class:`~milvus_edu.events.Recorder` come from one table.

Versioning: :data:`SCHEMA_VERSION` goes up whenever a column is added or a meaning changes; it is
stored in each Parquet file's metadata and in ``summary.json``. Adding a kind does not change the
version (readers must tolerate kinds they do not know).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1

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
    Field("channel", "string", True, "Physical or virtual channel the event is about (later mechanisms)."),
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


def _k(name: str, doc: str, fields: str, go: str) -> Kind:
    return Kind(name, doc, tuple(fields.split()), go)


EVENT_KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        _k("run.start", "The run began; `detail` holds scenario, seed and switches.", "detail", "-"),
        _k("run.end", "The run ended; `detail` holds the event count.", "detail", "-"),
        _k("tso.init", "A rootcoord initialised its timestamp oracle from the saved window.",
           "physical_ms logical window_end_ms clock_ms detail", "timestampOracle.InitTimestamp"),
        _k("tso.save", "The TSO window end was saved to the KV.", "window_end_ms clock_ms", "timestampOracle.saveTimestamp"),
        _k("tso.save_failed", "Saving the window failed; the TSO state is unchanged.", "error clock_ms",
           "timestampOracle.saveTimestamp"),
        _k("tso.update", "tsLoop advanced the physical part; logical restarts at 0.",
           "physical_ms logical window_end_ms clock_ms detail", "timestampOracle.UpdateTimestamp"),
        _k("tso.alloc", "GenerateTSO reserved `count` timestamps; `ts` is the last of the batch.",
           "ts count physical_ms logical window_end_ms clock_ms", "GlobalTSOAllocator.GenerateTSO"),
        _k("tso.alloc_retry", "GenerateTSO had to wait (not initialised, or logical overflow).",
           "count physical_ms logical error", "GlobalTSOAllocator.GenerateTSO"),
        _k("tso.alloc_failed", "GenerateTSO gave up.", "count error", "GlobalTSOAllocator.GenerateTSO"),
        _k("tso.set", "SetTSO moved the window forward to a user timestamp.",
           "ts physical_ms logical window_end_ms error", "timestampOracle.ResetUserTimestamp"),
        _k("tso.reset", "ResetTimestamp set the physical part to now.", "physical_ms logical clock_ms",
           "timestampOracle.ResetTimestamp"),
        _k("rootcoord.alloc_timestamp", "RootCoord answered AllocTimestamp; `ts` is the FIRST ts of the batch.",
           "ts count peer error", "Core.AllocTimestamp"),
        _k("session.register", "A coordinator registered its session and lease.", "detail", "Session.Register"),
        _k("session.active", "A coordinator won the ACTIVE key and became active.", "active detail",
           "Session.ProcessActiveStandBy"),
        _k("session.standby", "A coordinator found an ACTIVE key and waits as standby.", "active",
           "Session.ProcessActiveStandBy"),
        _k("session.lost", "A lease expired; its keys vanished from the KV.", "active detail", "etcd lease expiry"),
        _k("session.keepalive", "A coordinator's lease keep-alive was answered; the lease runs for another TTL.",
           "detail", "etcd clientv3 KeepAlive / Session.processKeepAliveResponse"),
        _k("session.keepalive_failed", "A keep-alive request failed (etcd unreachable or the lease is gone).",
           "error detail", "Session.processKeepAliveResponse"),
        _k("session.exit", "A coordinator process exits: it lost its session or its ACTIVE key, or activation failed.",
           "active detail", "Session.LivenessCheck / ProcessActiveStandBy (os.Exit, panic)"),
        _k("fault.kill", "A node was killed (no graceful stop, no lease revoke).", "detail", "-"),
        _k("fault.pause", "A node froze (a long GC or VM pause): it runs nothing until it resumes.", "detail", "-"),
        _k("fault.resume", "A paused node runs again, unaware that time passed.", "detail", "-"),
        _k("fault.clock_jump", "A node's wall clock jumped by `detail.delta_ms`.", "clock_ms detail", "-"),
        _k("client.request", "A client sent a request.", "count peer", "-"),
        _k("client.recv", "A client received a timestamp answer.", "ts count peer", "-"),
        _k("client.error", "A client's request failed (timeout, no active rootcoord, RPC error).", "peer error", "-"),
        _k("rpc.drop", "The network lost an RPC message.", "peer detail", "-"),
    )
}


def validate_kind(kind: str, fields: dict) -> None:
    """Raise ``ValueError`` when ``kind`` is unknown or ``fields`` names a column it does not fill."""
    spec = EVENT_KINDS.get(kind)
    if spec is None:
        raise ValueError(f"unknown event kind {kind!r}; add it to milvus_edu.events.schema.EVENT_KINDS")
    extra = set(fields) - set(spec.fields) - _BASE
    if extra:
        raise ValueError(f"event kind {kind!r} does not carry {sorted(extra)}; allowed: {list(spec.fields)}")


_ARROW = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}
_PANDAS = {"string": "string", "int64": "Int64", "float64": "float64"}


def arrow_schema() -> pa.Schema:
    """The Arrow schema of a run log, with the schema version in its metadata."""
    return pa.schema(
        [pa.field(f.name, _ARROW[f.type], nullable=f.nullable) for f in FIELDS],
        metadata={b"milvus_edu.schema_version": str(SCHEMA_VERSION).encode()},
    )


def pandas_dtypes() -> dict[str, str]:
    """Column -> pandas dtype (nullable integers, string dtype)."""
    return {f.name: _PANDAS[f.type] for f in FIELDS}
