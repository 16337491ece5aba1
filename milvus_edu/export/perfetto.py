"""A run as Chrome/Perfetto trace-event JSON, so it opens in standard trace viewers (ui.perfetto.dev, chrome://tracing).

The shape, from the Trace Event Format: every component (``node``) is a *process*; the channels it works on are its
*threads* (a vchannel, or a pchannel when the event names no vchannel), and thread ``main`` holds the rest. Each
process and thread is named by a metadata event (``ph`` ``M``: ``process_name``, ``thread_name``). Times are
simulated microseconds since the run began.

What an event becomes is each mechanism's to say: :attr:`milvus_edu.registry.Mechanism.trace` maps a kind to a
function of the row returning trace items, or ``None`` for the default. The items:

* :class:`Begin` / :class:`End`: a request's start and finish, joined by ``key`` into one complete slice
  (``ph`` ``X`` with ``ts`` and ``dur``). Ends are matched to the oldest open begin of their key; a begin never
  ended runs to the end of the run (``args.unfinished``); an end with no begin becomes an instant.
* :class:`Counter`: a watermark's value after the event (``ph`` ``C``), e.g. a pchannel's time tick.
* :class:`Instant`: a point event (``ph`` ``i``, thread scope).
* :class:`Flow`: a message this event sends or receives, named by ``key``. A receive is joined to the latest
  earlier send of its key (a message some components all receive, such as a pchannel's time tick, has one send and
  several receives); the pair becomes a flow arrow (``ph`` ``s`` at the sender, ``f`` at the receiver, one ``id``
  per pair) on the row's node and channel thread. Flow items ride on the row: a mapping that returns only flows
  keeps the row's default instant. A receive with no send before it draws nothing. :class:`FlowMatcher` does the
  joining for every view (the explorer's payload feeds it in its one pass over the rows); :func:`flow_pairs` lists
  a run's pairs on their own.

A kind no mechanism maps, or a mapping that returns ``None``, becomes an instant named by its kind on its node's
channel thread, with the row's non-empty columns as ``args``. The output is deterministic: processes and threads
are numbered in name order, events are sorted by time (then by run-log order), keys are sorted.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..events.io import RUN_FILES
from ..events.schema import SIM_EPOCH_MS
from ..tsoutil import physical_time

#: The thread of a process's events that name no channel, and of its counters.
MAIN = "main"


class ExportError(ValueError):
    """The export cannot be written where asked (the file exists); one line saying what to do. A ``ValueError``,
    as every bad input to milvus-edu's API."""


@dataclass(frozen=True)
class Begin:
    """The start of a slice on ``process``/``thread``, closed by the first later :class:`End` with the same ``key``."""

    key: tuple
    process: str
    thread: str
    name: str
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class End:
    """The end of the oldest open slice with ``key``; ``args`` are added to the slice's."""

    key: tuple
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Counter:
    """A watermark's value on ``process`` from this event on (one counter track per process and ``name``)."""

    process: str
    name: str
    value: float


@dataclass(frozen=True)
class Instant:
    """A point event on ``process``/``thread``."""

    process: str
    thread: str
    name: str
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Flow:
    """A message the event sends (``direction="send"``) or receives (``"recv"``); sends and receives of one message
    share ``key`` (a tuple whose first item names the message, e.g. ``("time tick", pchannel, tick_ts)``)."""

    key: tuple
    direction: str

    def __post_init__(self):
        if self.direction not in ("send", "recv"):
            raise ValueError(f"a flow's direction is 'send' or 'recv', got {self.direction!r}")


def ts_ms(ts) -> int | None:
    """A hybrid timestamp's physical part in ms since the run's time zero (what counters plot), ``None`` for none."""
    if ts is None or ts == 0:
        return None
    return physical_time(int(ts)) - SIM_EPOCH_MS


def rows(frame):
    """The run log's rows as dicts without their empty columns, numbers as plain Python numbers."""
    table = frame.astype(object).where(frame.notna(), None)  # pd.NA and NaN become None, once per column
    names = list(table.columns)
    for values in table.itertuples(index=False, name=None):
        yield {n: (v.item() if hasattr(v, "item") else v) for n, v in zip(names, values) if v is not None}


def _thread(row: dict) -> str:
    """The thread a row is drawn on in its node's process: its vchannel, else its channel, else the main one."""
    return row.get("vchannel") or row.get("channel") or MAIN


def default_instant(row: dict) -> Instant:
    """A row as a point event: its kind on its node's channel thread, with its non-empty columns."""
    args = {k: v for k, v in row.items() if k not in ("run_id", "t_ms", "node", "kind")}
    return Instant(row["node"], _thread(row), row["kind"], args)


def _us(t_ms: float) -> float:
    return round(float(t_ms) * 1000.0, 3)


def trace_mapping() -> dict:
    """kind -> trace function, from every registered mechanism's :attr:`~milvus_edu.registry.Mechanism.trace`."""
    from ..registry import mechanisms

    mapping = {}
    for mech in mechanisms():
        mapping.update(mech.trace)
    return mapping


def row_items(row: dict, mapping: dict) -> list:
    """The trace items of one row: what its kind's mapping returns, the row's default instant for none (or for a row
    whose fields its mapping cannot read: a hand-edited log), and the default instant beside flows when the mapping
    returned flows alone."""
    make = mapping.get(row["kind"])
    try:
        items = make(row) if make is not None else None
    except (TypeError, ValueError, KeyError, AttributeError):
        # a hand-edited field (a detail that is not its kind's JSON object): the row shows as a plain instant, as
        # `timeline` narrates it as "node: kind"
        items = None
    if items is None:
        return [default_instant(row)]
    if items and all(isinstance(i, Flow) for i in items):
        return [default_instant(row), *items]
    return list(items)


class FlowMatcher:
    """Joins each receive to the latest earlier send of its key, fed rows in run-log order."""

    def __init__(self):
        self._sent: dict[tuple, int] = {}

    def feed(self, seq: int, items) -> list[tuple[int, tuple]]:
        """The row ``seq``'s flows: ``(send_seq, key)`` for each receive that has a send (receives first, so an
        event that passes a message on never receives its own)."""
        out = []
        for item in items:
            if isinstance(item, Flow) and item.direction == "recv" and item.key in self._sent:
                out.append((self._sent[item.key], item.key))
        for item in items:
            if isinstance(item, Flow) and item.direction == "send":
                self._sent[item.key] = seq
        return out


def flow_pairs(frame) -> list[tuple[int, int, str]]:
    """Every message of a run log as ``(send_seq, recv_seq, name)`` in receive order (``name``: the key's first
    item), read from the mechanisms' :class:`Flow` items. Only the rows of kinds that some mechanism maps are read."""
    mapping = trace_mapping()
    mapped = frame[frame["kind"].isin(list(mapping))]
    matcher = FlowMatcher()
    out = []
    for row in rows(mapped):
        seq = int(row["seq"])
        out += [(send, seq, str(key[0])) for send, key in matcher.feed(seq, row_items(row, mapping))]
    return out


def perfetto_trace(events) -> dict:
    """The trace-event JSON object of a run: ``events`` is a run folder, a run-log file or its DataFrame."""
    from ..events import load_run

    frame = events if hasattr(events, "to_dict") else load_run(events)
    mapping = trace_mapping()
    matcher = FlowMatcher()
    sends: dict[int, tuple[float, str, str]] = {}  # seq -> (ts, process, thread) of each event that sends
    flows = 0
    records = []  # (ts_us, seq, process, thread, event-without-pid/tid)
    open_slices: dict[tuple, deque] = {}
    end_us = 0.0
    run_id = None
    for row in rows(frame):
        run_id = run_id or row.get("run_id")
        t = _us(row["t_ms"])
        end_us = max(end_us, t)
        seq = int(row["seq"])
        cat = str(row["kind"]).split(".", 1)[0]
        items = row_items(row, mapping)
        for send_seq, key in matcher.feed(seq, items):
            send_t, send_process, send_thread = sends[send_seq]
            flows += 1
            records.append((send_t, send_seq, send_process, send_thread,
                            {"ph": "s", "id": flows, "name": str(key[0]), "cat": "flow", "ts": send_t, "args": {}}))
            records.append((t, seq, row["node"], _thread(row),
                            {"ph": "f", "bp": "e", "id": flows, "name": str(key[0]), "cat": "flow", "ts": t,
                             "args": {}}))
        if any(isinstance(i, Flow) and i.direction == "send" for i in items):
            sends[seq] = (t, row["node"], _thread(row))
        for item in items:
            if isinstance(item, Begin):
                open_slices.setdefault(item.key, deque()).append((t, seq, cat, item))
            elif isinstance(item, End):
                waiting = open_slices.get(item.key)
                if not waiting:
                    item = default_instant(row)
                else:
                    begin_t, begin_seq, begin_cat, begin = waiting.popleft()
                    records.append((begin_t, begin_seq, begin.process, begin.thread,
                                    {"ph": "X", "name": begin.name, "cat": begin_cat, "ts": begin_t,
                                     "dur": round(t - begin_t, 3), "args": {**begin.args, **item.args}}))
                    continue
            if isinstance(item, Counter):
                records.append((t, seq, item.process, MAIN,
                                {"ph": "C", "name": item.name, "cat": cat, "ts": t, "args": {"value": item.value}}))
            elif isinstance(item, Instant):
                records.append((t, seq, item.process, item.thread,
                                {"ph": "i", "s": "t", "name": item.name, "cat": cat, "ts": t, "args": item.args}))
    for waiting in open_slices.values():
        for begin_t, begin_seq, begin_cat, begin in waiting:
            records.append((begin_t, begin_seq, begin.process, begin.thread,
                            {"ph": "X", "name": begin.name, "cat": begin_cat, "ts": begin_t,
                             "dur": round(end_us - begin_t, 3), "args": {**begin.args, "unfinished": True}}))
    threads: dict[str, set] = {}
    for _, _, process, thread, _ in records:
        threads.setdefault(process, {MAIN}).add(thread)
    pids = {name: i for i, name in enumerate(sorted(threads), start=1)}
    tids = {p: {name: i for i, name in enumerate([MAIN] + sorted(threads[p] - {MAIN}))} for p in threads}
    out = []
    for process in sorted(threads):
        pid = pids[process]
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}})
        for thread, tid in tids[process].items():
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
    records.sort(key=lambda r: (r[0], r[1]))
    for _, _, process, thread, event in records:
        out.append({**event, "pid": pids[process], "tid": tids[process][thread]})
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"run_id": run_id or ""}}


def _run_files(run) -> set[Path]:
    """The run's own files when ``run`` is a path (an export must never write over them): the folder's run files,
    or an events file and the run files beside it."""
    if not isinstance(run, (str, os.PathLike)):
        return set()
    path = Path(run)
    folder = path if path.is_dir() else path.parent
    return {(folder / name).resolve() for name in RUN_FILES} | {path.resolve()}


def export_perfetto(run, out: str | os.PathLike, force: bool = False) -> int:
    """Write the run (a folder, a run-log file or its DataFrame) as trace-event JSON to ``out``; returns the count of
    trace events. An existing ``out`` needs ``force``: :class:`ExportError` otherwise, and nothing is written. ``out``
    naming one of the run's own files (its ``events.jsonl``, say) is refused even with ``force``."""
    target = Path(out)
    if target.resolve() in _run_files(run):  # --force would replace the very log being exported
        raise ExportError(f"{target} is a file of the run being exported; choose another file, e.g. trace.json")
    if target.exists() and (target.is_dir() or not force):
        what = "is a folder" if target.is_dir() else "exists"
        raise ExportError(f"{target} {what}; choose another file" + ("" if target.is_dir() else " or add --force"))
    if not target.parent.is_dir():  # a typo in the folder is the user's to fix, not a failure of the disk
        raise ExportError(f"{target.parent} is not a folder; create it or choose a file in an existing folder")
    trace = perfetto_trace(run)
    text = json.dumps(trace, sort_keys=True, separators=(",", ":"))
    target.write_text(text + "\n", encoding="utf-8")
    return len(trace["traceEvents"])
