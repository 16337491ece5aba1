"""The TimeTick mechanism's events in words (one function per kind, registered as ``describe``)."""

from __future__ import annotations

from ...narrate import detail_of, plural, ts_text, value


def _stats(row) -> str:
    lo, hi = value(row, "min_ts"), value(row, "max_ts")
    if lo is None:
        return "no task is left on it"
    return f"its statistics are now min {ts_text(lo)}, max {ts_text(hi)}"


def _task(row):
    """A DML task's id: its ts (Go sets both from one allocation); older run logs also hold it as ``detail.task``."""
    return detail_of(row).get("task", value(row, "ts"))


def _enqueue(row) -> str:
    return (f"{value(row, 'node')} enqueues task {_task(row)} with ts {ts_text(value(row, 'ts'))}: "
            f"{plural(value(row, 'count'), 'row')} for {value(row, 'channel')}; {_stats(row)}.")


def _finish(row) -> str:
    return (f"{value(row, 'node')} finishes task {_task(row)} (ts {ts_text(value(row, 'ts'))}) on "
            f"{value(row, 'channel')}; {_stats(row)}.")


def _tick(row) -> str:
    reported = detail_of(row).get("reported", {})
    listed = ", ".join(f"{ch.rsplit('_', 1)[-1]}: {ts_text(v)}" for ch, v in sorted(reported.items()))
    busy = f"busy pchannels {listed}" if listed else "no pchannel has an unfinished task"
    return f"{value(row, 'node')}'s ticker takes ts {ts_text(value(row, 'ts'))}; {busy}."


def _report(row) -> str:
    channels = detail_of(row).get("channels", {})
    listed = ", ".join(f"{ch} {ts_text(v)}" for ch, v in sorted(channels.items()))
    rest = f"; {listed}" if listed else ""
    return (f"{value(row, 'node')} reports to {value(row, 'peer')}: default {ts_text(value(row, 'ts'))}{rest}.")


def _update(row) -> str:
    peer, err = value(row, "peer"), value(row, "error")
    if err:
        return f"{value(row, 'node')} rejects the report of {peer}: {err}."
    who = "its own DDL minimum" if peer == "ddl" else f"the report of {peer}"
    detail = detail_of(row)
    if detail.get("sent"):
        tail = "every session has now reported, so a round of time ticks goes out"
    else:
        waiting = detail.get("waiting_for")
        tail = f"still waiting for {', '.join(waiting)}" if waiting else "still waiting for other sessions"
    return f"{value(row, 'node')} takes {who} (default {ts_text(value(row, 'ts'))}); {tail}."


def _produce(row) -> str:
    node, ch, mtype = value(row, "node"), value(row, "channel"), value(row, "msg_type")
    if mtype == "TimeTick":
        who = detail_of(row).get("min_from")
        source = "ddl, rootcoord's own session for DDL" if who == "ddl" else who
        why = f" (the minimum came from {source})" if who else ""
        return (f"{node} writes time tick {ts_text(value(row, 'tick_ts'))} to {ch} as message "
                f"{value(row, 'msg_id')}{why}: nothing at or below it may follow.")
    vchannel = value(row, "vchannel")
    if vchannel is None:  # a DDL message (CreateCollection, DropCollection): no rows, no one vchannel
        return f"{node} writes {mtype} message {value(row, 'msg_id')} (ts {ts_text(value(row, 'end_ts'))}) to {ch}."
    return (f"{node} writes {mtype} message {value(row, 'msg_id')} ({plural(value(row, 'count'), 'row')}, ts "
            f"{ts_text(value(row, 'end_ts'))}) to {ch} for {vchannel}.")


def _pack(row) -> str:
    return (f"{value(row, 'node')} receives the pack ({ts_text(value(row, 'begin_ts'))}, "
            f"{ts_text(value(row, 'end_ts'))}] of {value(row, 'vchannel')}: {plural(value(row, 'count'), 'message')}.")


def _proxy_ticker_start(row) -> str:
    d = detail_of(row)
    return (f"{value(row, 'node')}'s channels time ticker starts from ts {ts_text(value(row, 'ts'))}: its tickLoop "
            f"first ticks {d.get('tick_phase_ms', 0):g} ms from now, its sendChannelsTimeTickLoop "
            f"{d.get('report_phase_ms', 0):g} ms from now.")


def _rootcoord_ticker_start(row) -> str:
    # the phase itself (detail.sync_ts_phase_ms) is left out: finding it is an exercise of the query lab
    return (f"{value(row, 'node')}'s timetick loops start: syncTsLoop, which moves the DDL minimum, and "
            "startTimeTickLoop, which sends it as a report of its own, each on a ticker of its own.")


DESCRIBE = {
    "proxy.ticker_start": _proxy_ticker_start,
    "rootcoord.ticker_start": _rootcoord_ticker_start,
    "proxy.enqueue": _enqueue,
    "proxy.finish": _finish,
    "proxy.tick": _tick,
    "proxy.report": _report,
    "rootcoord.timetick_update": _update,
    "rootcoord.session_add": lambda r: f"{value(r, 'node')}'s timetick sync now waits for {value(r, 'peer')}'s reports.",
    # delSession then calls sendToChannel: a round goes out if every session left has reported since the last one
    "rootcoord.session_del": lambda r: f"{value(r, 'node')}'s timetick sync stops waiting for {value(r, 'peer')} "
                                       "(its session is gone); if every other session has reported since the last "
                                       "round, a round of time ticks goes out now.",
    "mq.produce": _produce,
    "mq.pack": _pack,
    "mq.consume": lambda r: f"{value(r, 'node')} delivers message {value(r, 'msg_id')} (ts {ts_text(value(r, 'ts'))}) "
                            f"of {value(r, 'vchannel')}.",
}
