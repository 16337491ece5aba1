"""A workload on a real Milvus: the ``workload`` scenario's steps, sent through pymilvus on the wall clock, recorded
as a run folder in the run-log schema.

Each workload client is one ``MilvusClient`` (its own connection) on its own thread, running its steps in order,
each at ``step.at`` seconds after the start or as soon as its previous call returned, as the model's clients do.
Every call logs the client events the model logs for it (``client.create_collection``, ``client.insert``,
``client.delete``, ``client.flush``, ``client.read_start`` + ``client.read``, ``client.drop_collection``), with
``t_ms`` the wall-clock milliseconds since the run started, the timestamps pymilvus returns (a write's
``MutationResult.timestamp``, a collection's creation timestamp), the rows, ``detail.latency_ms`` and the error
Milvus gave. So :func:`milvus_edu.mechanisms.query.levels.reads` and the stepper's reads lane read the folder as
they read a simulated run.

How the model's collection maps onto a real one: the primary key ``id`` is ``VARCHAR`` when the workload's keys are
strings and ``INT64`` when they are whole numbers; each row gets a 2-dimensional ``vector`` (all rows the same, so a
search ranks nothing and returns what its filter keeps, up to its limit, as the model's search does); other fields
of a row go to the dynamic field; a collection has two shards, like the model's. A search or query by ``ids`` is
sent as the filter ``id in [...]``; a query with neither filter, ids nor limit gets the largest limit Milvus allows
(an empty filter needs one).

Where the real run departs from the schedule: a ``create_collection`` or ``drop_collection`` runs once every step
listed before it returned, and the steps after it start as much later as it ended past its own time (a real
create, with its index and load, takes about 3 s; the model's takes milliseconds), so the gaps between it and the
steps after it stay as written.

pymilvus keeps the Session timestamps of all ``MilvusClient`` objects of a process in one table per collection
name; the model's clients are separate programs with a table each. While a workload runs, each client's thread
gets its own table (:func:`_per_client_session_ts`), so a Session read waits for its own client's writes only.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ..version import __version__
from ..events import MemorySink, Recorder, rows_to_frame
from ..client.workload import READ_OPS, SEED_STEPS, Step, parse_steps
from ..proto import ConsistencyLevel
from ..querynode.expr import PK_FIELD
from .logs import merge_events, parse_log, write_real_run
from .metrics import MetricsSampler, metric_events
from .server import MILVUS_VERSION, RealMilvus, RealMilvusError, check_pymilvus

#: Dimension of the vector field every real collection gets.
DIM = 2
#: The vector every row and every search carries.
VECTOR = [1.0, 0.0]
#: Longest string key a real collection takes.
MAX_KEY_LENGTH = 512
#: A query with no filter, ids or limit asks for this many rows (Milvus's largest query window).
QUERY_ALL_LIMIT = 16384
#: Shards of a real collection (the model's collections have two, one per pchannel).
SHARDS = 2
#: The name of the workload scenario, in the run's ``run.start``: the stepper draws the query mechanism's lanes.
SCENARIO = "workload"


_DDL = ("create_collection", "drop_collection")


class WorkloadError(ValueError):
    """A workload the real server cannot run as written (one line: which step and why)."""


@dataclass
class RealRun:
    """What :func:`run_workload` returns: the events, the run folder (when written), the server's log folder and
    figures (``server``: version, uri, start seconds, memory)."""

    rows: list[dict]
    out_dir: Path | None
    server_logs: Path | None
    server: dict = field(default_factory=dict)

    @property
    def events(self) -> pd.DataFrame:
        """The run log as a DataFrame (the schema's dtypes)."""
        return rows_to_frame(self.rows)


# ---------------------------------------------------------------------------------------------- the collections


def key_types(steps: list[Step]) -> dict[str, str]:
    """Each collection's primary-key type from the keys the workload inserts and deletes: ``"string"`` or ``"int"``;
    :class:`WorkloadError` when one collection mixes them (Milvus's primary key has one type)."""
    seen: dict[str, set[str]] = {}
    for step in steps:
        keys = []
        if "ids" in step.args:
            ids = step.args["ids"]
            keys = list(ids) if isinstance(ids, (list, tuple)) else [ids]
        elif step.op == "insert":
            data = step.args.get("data") or []
            keys = [row.get(PK_FIELD) for row in ([data] if isinstance(data, dict) else data)]
        for k in keys:
            if isinstance(k, bool) or not isinstance(k, (int, str)):
                raise WorkloadError(f"collection {step.collection}: key {k!r} is neither a string nor a whole "
                                    "number; Milvus's primary key is one of these")
            seen.setdefault(step.collection, set()).add("int" if isinstance(k, int) else "string")
    out = {}
    for name in {s.collection for s in steps}:
        types = seen.get(name, {"string"})
        if len(types) > 1:
            raise WorkloadError(f"collection {name} mixes string and whole-number keys; Milvus's primary key has one "
                                "type: use one kind of key per collection")
        out[name] = types.pop()
    return out


def _literal(values) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def read_filter(args: dict) -> str:
    """The filter a real search or query sends: the step's ``filter`` and its ``ids`` (as ``id in [...]``)."""
    parts = []
    if args.get("filter"):
        parts.append(str(args["filter"]))
    if "ids" in args:
        ids = args["ids"]
        parts.append(f"{PK_FIELD} in {_literal(ids if isinstance(ids, (list, tuple)) else [ids])}")
    if len(parts) == 2:
        return f"({parts[0]}) and ({parts[1]})"
    return parts[0] if parts else ""


def insert_rows(args: dict) -> list[dict]:
    """A step's insert rows as the real collection takes them (each with the shared vector)."""
    if "ids" in args:
        ids = args["ids"]
        return [{PK_FIELD: k, "vector": list(VECTOR)} for k in (ids if isinstance(ids, (list, tuple)) else [ids])]
    data = args.get("data") or []
    rows = [data] if isinstance(data, dict) else list(data)
    return [{**row, "vector": list(row.get("vector", VECTOR))} for row in rows]


# ---------------------------------------------------------------------------------------------- Session timestamps


class _PerThreadTs:
    """pymilvus's session-timestamp table (``GTsDict``: ``update`` and ``get``), one per thread; it also remembers
    the last timestamp a write of this thread returned, which ``MilvusClient.insert`` does not hand back."""

    def __init__(self):
        self._local = threading.local()

    def _table(self) -> dict:
        if not hasattr(self._local, "table"):
            self._local.table = {}
        return self._local.table

    def update(self, collection, ts: int) -> None:
        """pymilvus's ``update``: keep the larger timestamp."""
        table = self._table()
        self._local.last = ts
        if ts > table.get(collection, 0):
            table[collection] = ts

    def get(self, collection) -> int:
        """The thread's last write timestamp to ``collection`` (0: none)."""
        return self._table().get(collection, 0)

    def take_last(self) -> int | None:
        """The timestamp the thread's last write returned, once."""
        ts = getattr(self._local, "last", None)
        self._local.last = None
        return ts


@contextmanager
def _per_client_session_ts():
    """While in the block, every thread has its own pymilvus session-timestamp table."""
    from pymilvus.client import ts_utils

    if not hasattr(ts_utils, "_get_gts_dict"):
        raise RealMilvusError("this pymilvus keeps Session timestamps in a way milvus-edu does not know; install "
                              "pymilvus 2.5.x: pip install 'milvus-edu[real]'")
    table = _PerThreadTs()
    original = ts_utils._get_gts_dict
    ts_utils._get_gts_dict = lambda: table
    try:
        yield table
    finally:
        ts_utils._get_gts_dict = original


# ---------------------------------------------------------------------------------------------- the run


class _Run:
    """One workload on one server: the clients' threads, the schedule, the recorder."""

    def __init__(self, steps: list[Step], server: RealMilvus, recorder: Recorder, run_id: str):
        self.steps = steps
        self.server = server
        self.rec = recorder
        self.run_id = run_id
        self.types = key_types(steps)
        self.levels: dict[str, ConsistencyLevel] = {}
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.shift_s = 0.0  # how much later than written the schedule runs (the DDLs' time)
        self.requests = 0
        self.done = [threading.Event() for _ in steps]
        self.failures: list[BaseException] = []
        self.ts_table: _PerThreadTs | None = None
        self.start_detail: dict = {}
        self.t0_wall_ms = time.time() * 1000.0  # the wall clock at t_ms 0 (set again when the clients start)

    def now_ms(self) -> float:
        """Wall-clock milliseconds since the run started."""
        return (time.monotonic() - self.t0) * 1000.0

    def emit(self, kind_: str, node: str, **fields) -> None:
        with self.lock:
            self.rec.emit(kind_, node, **fields)

    def run(self) -> None:
        from pymilvus import MilvusClient

        clients = {}
        for step in self.steps:
            if step.client not in clients:
                clients[step.client] = MilvusClient(uri=self.server.uri, alias=f"{self.run_id}-{step.client}",
                                                    timeout=60)
        try:
            self._drop_leftovers(next(iter(clients.values())))
            with _per_client_session_ts() as table:
                self.ts_table = table
                self.t0 = time.monotonic()
                self.t0_wall_ms = time.time() * 1000.0
                self.emit("run.start", "client", detail=self.start_detail)
                self.emit("run.clock", "client", clock_ms=int(time.time() * 1000),
                          detail={"server": f"milvus {MILVUS_VERSION}", "uri": self.server.uri,
                                  "start_s": self.server.start_s, "rss_mb": self.server.rss_mb_at_start})
                threads = [threading.Thread(target=self._program, args=(name, client), name=f"workload-{name}",
                                            daemon=True) for name, client in clients.items()]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        finally:
            for client in clients.values():
                client.close()
        if self.failures:
            raise self.failures[0]

    def _drop_leftovers(self, client) -> None:
        """A server may have run a workload before: drop the collections this one creates, so each starts fresh."""
        existing = set(client.list_collections())
        for name in sorted({s.collection for s in self.steps if s.op == "create_collection"} & existing):
            client.drop_collection(name)

    def _wait_turn(self, index: int, step: Step) -> None:
        """Wait for the step's time, for every DDL listed before it, and (for a DDL) for every step before it."""
        for j in range(index):
            if step.op in _DDL or self.steps[j].op in _DDL:
                self.done[j].wait()
        while True:
            delay = self.t0 + step.at + self.shift_s - time.monotonic()
            if delay <= 0:
                return
            time.sleep(min(delay, 0.05))

    def _program(self, name: str, client) -> None:
        for index, step in enumerate(self.steps):
            if step.client != name:
                continue
            try:
                self._wait_turn(index, step)
                self._call(client, index, step)
                if step.op in _DDL:  # as if it took no time at its own time: the steps after it keep their gaps
                    self.shift_s = max(self.shift_s, time.monotonic() - self.t0 - step.at)
            except BaseException as exc:  # a bug here must not hang the other clients
                self.failures.append(exc)
            finally:
                self.done[index].set()

    # ---- the calls

    def _call(self, client, index: int, step: Step) -> None:
        base = {"collection": step.collection, "label": step.label, "step": index, "at_s": step.at}
        if step.op in READ_OPS:
            self._read(client, step, base)
            return
        started = time.monotonic()
        try:
            result = getattr(self, f"_{step.op}")(client, step)
            error = None
        except Exception as exc:  # Milvus's refusal, as the client sees it
            result, error = {}, _one_line(exc)
        latency = round((time.monotonic() - started) * 1000.0, 3)
        kind_ = f"client.{step.op}"
        fields = {k: v for k, v in result.items() if k in ("ts", "count", "level") and v is not None}
        detail = {**base, **result.get("detail", {}), "latency_ms": latency}
        if error is not None:
            fields = {}
        self.emit(kind_, step.client, peer="proxy", **fields, error=error, detail=detail)

    def _create_collection(self, client, step: Step) -> dict:
        level = ConsistencyLevel.parse(step.args.get("consistency_level", "Bounded"))
        key = self.types[step.collection]
        extra = {"max_length": MAX_KEY_LENGTH} if key == "string" else {}
        client.create_collection(step.collection, dimension=DIM, primary_field_name=PK_FIELD, id_type=key,
                                 vector_field_name="vector", consistency_level=level.name.capitalize(),
                                 shards_num=int(step.args.get("shards_num", SHARDS)), **extra)
        self.levels[step.collection] = level
        desc = client.describe_collection(step.collection)
        return {"ts": int(desc.get("created_timestamp") or 0) or None, "level": level.name.capitalize(),
                "detail": {"collection_id": desc.get("collection_id"), "shards": desc.get("num_shards"),
                           "key_type": key}}

    def _drop_collection(self, client, step: Step) -> dict:
        client.drop_collection(step.collection)
        return {}

    def _insert(self, client, step: Step) -> dict:
        rows = insert_rows(step.args)
        self.ts_table.take_last()
        res = client.insert(step.collection, rows)
        return {"ts": self.ts_table.take_last(), "count": int(res.get("insert_count", 0)),
                "detail": {"pks": [r[PK_FIELD] for r in rows]}}

    def _delete(self, client, step: Step) -> dict:
        self.ts_table.take_last()
        if "ids" in step.args:
            ids = step.args["ids"]
            pks = list(ids) if isinstance(ids, (list, tuple)) else [ids]
            res = client.delete(step.collection, ids=pks)
        else:
            pks = None
            res = client.delete(step.collection, filter=str(step.args.get("filter", "")))
        ts = self.ts_table.take_last()
        # 2.3.5 returns timestamp 0 for a delete: kept as returned_ts, the ts column stays empty (no such time)
        return {"ts": ts or None, "count": int(res.get("delete_count", 0)) if isinstance(res, dict) else None,
                "detail": {"pks": pks, "returned_ts": ts}}

    def _flush(self, client, step: Step) -> dict:
        client.flush(step.collection)
        return {"detail": {"flushed": True}}

    def _read(self, client, step: Step, base: dict) -> None:
        from pymilvus.client.ts_utils import construct_guarantee_ts

        args = step.args
        op = step.op  # one of READ_OPS
        given = args.get("consistency_level")
        sent_level = None if given is None else ConsistencyLevel.parse(given)
        kwargs = {} if sent_level is None else {"consistency_level": sent_level.name.capitalize()}
        if "guarantee_timestamp" in args:
            kwargs["guarantee_timestamp"] = args["guarantee_timestamp"]
        probe = dict(kwargs)
        construct_guarantee_ts(step.collection, probe)  # what pymilvus will send, from this thread's table
        sent_ts = probe.get("guarantee_timestamp")
        with self.lock:
            self.requests += 1
            request = self.requests
        level = sent_level if sent_level is not None else self.levels.get(step.collection)
        level_name = None if level is None else level.name.capitalize()
        self.emit("client.read_start", step.client, peer="proxy", request=request,
                  level=None if sent_level is None else level_name, guarantee_ts=sent_ts,
                  detail={"op": op, **base})
        started_ms = self.now_ms()
        started = time.monotonic()
        filt = read_filter(args)
        try:
            if op == "search":
                res = client.search(step.collection, data=[list(args.get("data", [VECTOR])[0])]
                                    if args.get("data") else [list(VECTOR)], filter=filt,
                                    limit=int(args.get("limit", 10)), timeout=args.get("timeout"), **kwargs)
                pks = [hit["id"] for hit in res[0]] if len(res) else []
                session_ts = int(getattr(res, "get_session_ts", lambda: 0)() or 0)
            else:
                limit = args.get("limit")
                if limit is None and not filt:
                    limit = QUERY_ALL_LIMIT
                extra = {} if limit is None else {"limit": int(limit)}
                res = client.query(step.collection, filter=filt, output_fields=[PK_FIELD],
                                   timeout=args.get("timeout"), **extra, **kwargs)
                pks = [row[PK_FIELD] for row in res]
                session_ts = int((getattr(res, "extra", None) or {}).get("session_ts") or 0)
            error = None
        except Exception as exc:  # Milvus's refusal or a timeout, as the client sees it
            pks, session_ts, error = [], 0, _one_line(exc)
        latency = round((time.monotonic() - started) * 1000.0, 3)
        detail = {"op": op, **base, "started_ms": round(started_ms, 3), "latency_ms": latency}
        if error is not None:
            self.emit("client.read", step.client, peer="proxy", request=request, error=error, detail=detail)
            return
        # The proxy keeps a Session, Eventually or Customized guarantee as sent; a Strong or Bounded one it makes
        # itself (from the TSO or its clock) and does not return.
        kept = level_name in ("Session", "Eventually", "Customized")
        self.emit("client.read", step.client, ts=session_ts or None, count=len(pks), peer="proxy", request=request,
                  level=level_name, guarantee_ts=sent_ts if kept else None, detail={**detail, "pks": pks})


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:500]


def server_events(server: RealMilvus, run_id: str, t0_wall_ms: float, end_ms: float) -> tuple[list[dict], dict]:
    """The server's log lines of this run as run-log events (the log parser, :mod:`milvus_edu.real.logs`), with
    ``t_ms`` on the run's time line (0 at ``t0_wall_ms``), only those from 0 to ``end_ms`` (a shared server's log
    holds earlier runs too); and how many lines the parser could not read (``{"unparsed": n}``).

    This is the one place the client's run meets the server's log.
    """
    parsed = parse_log(server.logs, run_id=run_id, t0=int(round(t0_wall_ms)))
    events = [row for row in parsed.events if 0.0 <= row["t_ms"] <= end_ms]
    return events, {"unparsed": parsed.unparsed}


def _in_time_order(rows: list[dict]) -> list[dict]:
    """Server rows from two sources (the log, the sampled gauges) in one time order, ``seq`` renumbered; rows of one
    ms keep the order they are given in."""
    rows = sorted(rows, key=lambda r: r["t_ms"])  # stable: each source's own order holds within a ms
    for seq, r in enumerate(rows):
        r["seq"] = seq
    return rows


def run_workload(steps=(), server: RealMilvus | None = None, out_dir=None, params: dict | None = None,
                 run_id: str | None = None, server_logs: bool = True, metrics: bool = True) -> RealRun:
    """Run a workload (the ``workload`` scenario's steps; the seed example's when empty) on a real Milvus.

    ``server``: a started :class:`RealMilvus` to use (a shared one; the workload drops its own collections first if
    the server has them); without one, a server is started in ``<out_dir>/server`` (or a temporary folder) with
    ``params`` (the simulator's names, :data:`~.server.PARAMS`) and stopped at the end, its logs kept there.
    ``out_dir``: write the run folder (``events.parquet``, ``events.jsonl``, ``summary.json``; must be new or
    empty). ``server_logs``: merge the server's log lines of the run into the events (:func:`server_events`).
    ``metrics``: sample the server's time-tick gauges every :data:`~.metrics.PERIOD_MS` while the workload runs and
    merge them as time ticks, proxy reports and QueryNode tsafe (:mod:`milvus_edu.real.metrics`; the log has none);
    the folder then also holds ``metrics.jsonl``, every change sampled.
    Raises ``ValueError`` for a bad workload and :class:`RealMilvusError` when the server cannot be used.
    """
    from ..sim.run import prepare_out_dir

    parsed = parse_steps(list(steps) or list(SEED_STEPS))
    key_types(parsed)  # a workload the real server cannot take fails before a server starts
    check_pymilvus()
    out = prepare_out_dir(out_dir, False) if out_dir is not None else None
    own = server is None
    if own:
        server = RealMilvus(folder=(out / "server") if out is not None else None, params=params)
        server.start()
    elif params:
        raise ValueError("params apply when run_workload starts its own server; give them to RealMilvus instead")
    try:
        run_id = run_id or f"real-{SCENARIO}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
        memory = MemorySink()
        run = _Run(parsed, server, None, run_id)
        recorder = Recorder(run_id, now_ms=run.now_ms, sinks=[memory])
        run.rec = recorder
        run.start_detail = {"scenario": SCENARIO, "real": True, "server": f"milvus {MILVUS_VERSION}",
                            "version": __version__, "options": {"steps": len(parsed)},
                            "params": {k: str(v) for k, v in (params or {}).items()}}
        sampler = MetricsSampler(server.metrics_url).start() if metrics else None
        try:
            run.run()
        finally:
            if sampler is not None:
                sampler.stop()
            recorder.emit("run.end", "client", detail={"events": recorder.seq + 1})
            recorder.close()
        rows, parse_info = memory.rows, {}
        end_ms = rows[-1]["t_ms"]
        theirs = []
        if server_logs:
            theirs, parse_info = server_events(server, run_id, run.t0_wall_ms, end_ms)
        if sampler is not None:
            ticks = [r for r in metric_events(sampler.changes, run_id=run_id, t0_wall_ms=run.t0_wall_ms,
                                              period_ms=sampler.period_ms, server_rows=theirs)
                     if 0.0 <= r["t_ms"] <= end_ms]
            # the gauges' rows first: a pack placed at the read it let through shares the read's ms, and comes before it
            theirs = _in_time_order(ticks + theirs)
        if theirs:
            rows = merge_events(rows, theirs, run_id=run_id)
        info = {"version": MILVUS_VERSION, "uri": server.uri, "start_s": server.start_s,
                "rss_mb_at_start": server.rss_mb_at_start, "rss_mb_at_end": server.rss_mb(),
                "logs": str(server.logs), "log_parser": parse_info}
        if sampler is not None:
            info["metrics"] = sampler.summary()
        if out is not None:
            write_real_run(out, rows, {"real": True, "server": info}, scenario=SCENARIO)
            if sampler is not None:
                with open(out / "metrics.jsonl", "w", encoding="utf-8") as fh:
                    for c in sampler.changes:
                        fh.write(json.dumps(asdict(c), sort_keys=True) + "\n")
        return RealRun(rows, out, server.logs, info)
    finally:
        if own:
            server.stop()
