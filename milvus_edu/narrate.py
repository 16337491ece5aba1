"""Events in words: one sentence per event, for timelines, the stepper's state panel and the CLI.

A pure function of one run-log row (a dict or a pandas row); it never re-runs model logic.
"""

from __future__ import annotations

import json
import math

from .events.schema import SIM_EPOCH_MS
from .tsoutil import parse_hybrid_ts


def _v(row, name):
    value = row.get(name) if isinstance(row, dict) else getattr(row, name, None)
    if value is None:
        return None
    try:
        if value is getattr(__import__("pandas"), "NA") or (isinstance(value, float) and math.isnan(value)):
            return None
    except TypeError:
        return value
    return value


def wall_text(unix_ms) -> str:
    """A wall-clock value (Unix ms) as signed ``HH:MM:SS.mmm`` since the run's time zero.

    Time zero is :data:`~milvus_edu.events.SIM_EPOCH_MS`; a clock that is behind it reads negative
    (``-00:00:14.950``), so "earlier" always looks smaller.
    """
    rel = int(unix_ms) - SIM_EPOCH_MS
    sign, rel = ("-", -rel) if rel < 0 else ("", rel)
    return f"{sign}{rel // 3_600_000:02d}:{rel // 60_000 % 60:02d}:{rel // 1000 % 60:02d}.{rel % 1000:03d}"


def ts_text(ts) -> str:
    """A hybrid timestamp as ``<physical as wall_text>+<logical>``, e.g. ``00:00:12.001+3``."""
    physical, logical = parse_hybrid_ts(int(ts))
    return f"{wall_text(physical)}+{logical}"




def _loaded(detail: dict) -> str:
    if "ignored_window_end_ms" in detail:
        ignored = detail["ignored_window_end_ms"]
        saved = f"the saved window end {wall_text(ignored)}" if ignored else "the saved window"
        return f"ignoring {saved}: bug switch {detail.get('bug_switch')}"
    loaded = detail.get("loaded_window_end_ms") or 0
    return f"loaded window end was {wall_text(loaded)}" if loaded else "nothing was saved before"


def detail_dict(raw) -> dict:
    """The ``detail`` column as a dict; ``{}`` when it is empty, not JSON, or not a JSON object."""
    if not raw or raw is getattr(__import__("pandas"), "NA"):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _detail(row) -> dict:
    return detail_dict(_v(row, "detail"))


def describe(row) -> str:
    """One sentence saying what the event means (a plain ``node: kind`` when fields are missing)."""
    try:
        return _describe(row)
    except (TypeError, ValueError, KeyError):
        return f"{_v(row, 'node')}: {_v(row, 'kind')}"


def _describe(row) -> str:
    kind, node = _v(row, "kind"), _v(row, "node")
    ts, count, err = _v(row, "ts"), _v(row, "count"), _v(row, "error")
    detail = _detail(row)
    win = _v(row, "window_end_ms")
    phys = _v(row, "physical_ms")
    if kind == "run.start":
        return f"Run starts: scenario {detail.get('scenario')}, seed {detail.get('seed')}."
    if kind == "run.end":
        return "Run ends."
    if kind == "tso.init":
        where = "one guard past the saved window" if detail.get("started_after_window") else "at its own clock"
        return (f"{node} initialises its TSO {where}: physical {wall_text(phys)}, window saved to {wall_text(win)} "
                f"({_loaded(detail)}).")
    if kind == "tso.save":
        return f"{node} saves the window end {wall_text(win)} to etcd (by-dev/kv/gid/timestamp)."
    if kind == "tso.save_failed":
        return f"{node} could not save the window ({err}); its TSO state stays as it was."
    if kind == "tso.update":
        why = "its clock moved on" if detail.get("reason") == "clock" else "more than half the logical space was used"
        return f"{node}'s tsLoop moves physical to {wall_text(phys)} because {why}; logical restarts at 0."
    if kind == "tso.alloc":
        return f"{node} reserves {count:,} timestamp(s) on physical {wall_text(phys)}; the last is {ts_text(ts)}."
    if kind == "tso.alloc_retry":
        return f"{node} must wait before allocating: {err}."
    if kind == "tso.alloc_failed":
        return f"{node} gives up allocating: {err}."
    if kind == "tso.set":
        return f"{node} SetTSO: {err}." if err else f"{node} moves its TSO forward to {ts_text(ts)} (SetTSO)."
    if kind == "tso.reset":
        return f"{node} resets its TSO physical part to its clock."
    if kind == "rootcoord.alloc_timestamp":
        if err:
            return f"{node} fails AllocTimestamp for {_v(row, 'peer')}: {err}."
        return f"{node} answers {_v(row, 'peer')}: {count:,} timestamp(s) starting at {ts_text(ts)}."
    if kind == "session.register":
        return f"{node} registers its session with a {detail.get('ttl_s', '?')} s lease."
    if kind == "session.active":
        return f"{node} wins the ACTIVE key and becomes the active rootcoord."
    if kind == "session.standby":
        return f"{node} finds {_v(row, 'active')} active and waits as standby, watching the ACTIVE key."
    if kind == "session.lost":
        return f"etcd deletes {detail.get('key', detail.get('reason', 'a key'))}: its lease ran out."
    if kind == "fault.kill":
        return f"{node} is killed{' while active' if detail.get('was_active') else ''}; it revokes nothing."
    if kind == "fault.clock_jump":
        return f"{node}'s clock jumps by {detail.get('delta_ms'):+,.0f} ms."
    if kind == "client.request":
        return f"{node} asks {_v(row, 'peer')} for {count:,} timestamp(s)."
    if kind == "client.recv":
        return f"{node} receives {count:,} timestamp(s) starting at {ts_text(ts)} from {_v(row, 'peer')}."
    if kind == "client.error":
        return f"{node}'s request failed: {err}."
    if kind == "rpc.drop":
        return f"The network loses a message from {node} to {_v(row, 'peer')}."
    return f"{node}: {kind}"
