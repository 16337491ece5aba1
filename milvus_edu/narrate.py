"""Events in words: one sentence per event, for timelines, the stepper's state panel and the CLI.

A pure function of one run-log row (a dict or a pandas row); it never re-runs model logic.
"""

from __future__ import annotations

import json
import math

from .tsoutil import format_ts


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


def _hms(ms) -> str:
    total = int(ms) % 86_400_000
    return f"{total // 3_600_000:02d}:{total // 60_000 % 60:02d}:{total // 1000 % 60:02d}.{total % 1000:03d}"


def _loaded(detail: dict) -> str:
    loaded = detail.get("loaded_window_end_ms") or 0
    return f"loaded window end was {_hms(loaded)}" if loaded else "nothing was saved before"


def describe(row) -> str:
    """One sentence saying what the event means."""
    kind, node = _v(row, "kind"), _v(row, "node")
    ts, count, err = _v(row, "ts"), _v(row, "count"), _v(row, "error")
    detail = json.loads(_v(row, "detail")) if _v(row, "detail") else {}
    win = _v(row, "window_end_ms")
    phys = _v(row, "physical_ms")
    if kind == "run.start":
        return f"Run starts: scenario {detail.get('scenario')}, seed {detail.get('seed')}."
    if kind == "run.end":
        return "Run ends."
    if kind == "tso.init":
        where = "one guard past the saved window" if detail.get("started_after_window") else "at its own clock"
        return (f"{node} initialises its TSO {where}: physical {_hms(phys)}, window saved to {_hms(win)} "
                f"({_loaded(detail)}).")
    if kind == "tso.save":
        return f"{node} saves the window end {_hms(win)} to etcd (by-dev/kv/gid/timestamp)."
    if kind == "tso.save_failed":
        return f"{node} could not save the window ({err}); its TSO state stays as it was."
    if kind == "tso.update":
        why = "its clock moved on" if detail.get("reason") == "clock" else "more than half the logical space was used"
        return f"{node}'s tsLoop moves physical to {_hms(phys)} because {why}; logical restarts at 0."
    if kind == "tso.alloc":
        return f"{node} reserves {count} timestamp(s) on physical {_hms(phys)}; the last is {format_ts(ts)}."
    if kind == "tso.alloc_retry":
        return f"{node} must wait before allocating: {err}."
    if kind == "tso.alloc_failed":
        return f"{node} gives up allocating: {err}."
    if kind == "tso.set":
        return f"{node} SetTSO: {err}." if err else f"{node} moves its TSO forward to {format_ts(ts)} (SetTSO)."
    if kind == "tso.reset":
        return f"{node} resets its TSO physical part to its clock."
    if kind == "rootcoord.alloc_timestamp":
        if err:
            return f"{node} fails AllocTimestamp for {_v(row, 'peer')}: {err}."
        return f"{node} answers {_v(row, 'peer')}: {count} timestamp(s) starting at {format_ts(ts)}."
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
        return f"{node} asks {_v(row, 'peer')} for {count} timestamp(s)."
    if kind == "client.recv":
        return f"{node} receives {count} timestamp(s) starting at {format_ts(ts)} from {_v(row, 'peer')}."
    if kind == "client.error":
        return f"{node}'s request failed: {err}."
    if kind == "rpc.drop":
        return f"The network loses a message from {node} to {_v(row, 'peer')}."
    return f"{node}: {kind}"
