"""The TSO mechanism's events in words (one function per kind, registered as ``describe``)."""

from __future__ import annotations

from ...narrate import detail_of, plural, ts_text, value, wall_text


def _loaded(detail: dict) -> str:
    if "ignored_window_end_ms" in detail:
        ignored = detail["ignored_window_end_ms"]
        saved = f"the saved window end {wall_text(ignored)}" if ignored else "the saved window"
        return f"ignoring {saved}: bug switch {detail.get('bug_switch')}"
    loaded = detail.get("loaded_window_end_ms") or 0
    return f"loaded window end was {wall_text(loaded)}" if loaded else "nothing was saved before"


def _init(row) -> str:
    detail = detail_of(row)
    where = "one guard past the saved window" if detail.get("started_after_window") else "at its own clock"
    return (f"{value(row, 'node')} initialises its TSO {where}: physical {wall_text(value(row, 'physical_ms'))}, "
            f"window saved to {wall_text(value(row, 'window_end_ms'))} ({_loaded(detail)}).")


def _update(row) -> str:
    why = ("its clock moved on" if detail_of(row).get("reason") == "clock"
           else "more than half the logical space was used")
    return (f"{value(row, 'node')}'s tsLoop moves physical to {wall_text(value(row, 'physical_ms'))} because {why}; "
            "logical restarts at 0.")


def _set(row) -> str:
    node, err = value(row, "node"), value(row, "error")
    return f"{node} SetTSO: {err}." if err else f"{node} moves its TSO forward to {ts_text(value(row, 'ts'))} (SetTSO)."


def _alloc_timestamp(row) -> str:
    node, peer, err = value(row, "node"), value(row, "peer"), value(row, "error")
    if err:
        return f"{node} fails AllocTimestamp for {peer}: {err}."
    return f"{node} answers {peer}: {plural(value(row, 'count'), 'timestamp')} starting at {ts_text(value(row, 'ts'))}."


def _alloc_retry(row) -> str:
    node, err, count = value(row, "node"), value(row, "error"), value(row, "count")
    if "logical" in str(err):
        physical = wall_text(value(row, "physical_ms"))
        return (f"{node} cannot hand out {plural(count, 'timestamp')} now: the logical counter went to "
                f"{value(row, 'logical'):,}, at or past maxLogical (2^18 = 262,144 by default), on physical "
                f"{physical}; "
                "GenerateTSO sleeps 50 ms (one tsLoop period) and tries again.")
    return f"{node} cannot hand out timestamps yet ({err}): GenerateTSO sleeps 200 ms and tries again."


def _lost(row) -> str:
    detail = detail_of(row)
    if "key" in detail:
        return f"etcd deletes {detail['key']}: its lease ran out."
    return f"{value(row, 'node')} loses its session: {detail.get('reason', 'its lease is gone')}."


def _exit(row) -> str:
    return f"{value(row, 'node')} exits: {detail_of(row).get('reason', 'its session is gone')}."


DESCRIBE = {
    "tso.init": _init,
    "tso.save": lambda r: f"{value(r, 'node')} saves the window end {wall_text(value(r, 'window_end_ms'))} to etcd "
                          "(by-dev/kv/gid/timestamp).",
    "tso.save_failed": lambda r: f"{value(r, 'node')} could not save the window ({value(r, 'error')}); "
                                 "its TSO state stays as it was.",
    "tso.update": _update,
    "tso.alloc": lambda r: f"{value(r, 'node')} reserves {plural(value(r, 'count'), 'timestamp')} on physical "
                           f"{wall_text(value(r, 'physical_ms'))}; the last is {ts_text(value(r, 'ts'))}.",
    "tso.alloc_retry": _alloc_retry,
    "tso.alloc_failed": lambda r: f"{value(r, 'node')} gives up allocating: {value(r, 'error')}.",
    "tso.set": _set,
    "tso.reset": lambda r: f"{value(r, 'node')} resets its TSO physical part to its clock.",
    "rootcoord.alloc_timestamp": _alloc_timestamp,
    "session.register": lambda r: f"{value(r, 'node')} registers its session with a "
                                  f"{detail_of(r).get('ttl_s', '?')} s lease.",
    "session.active": lambda r: f"{value(r, 'node')} wins the ACTIVE key and becomes the active rootcoord.",
    "session.standby": lambda r: f"{value(r, 'node')} finds {value(r, 'active')} active and waits as standby, "
                                 "watching the ACTIVE key.",
    "session.lost": _lost,
    "session.keepalive": lambda r: f"etcd answers {value(r, 'node')}'s keep-alive: its lease runs another "
                                   f"{detail_of(r).get('ttl_s', '?')} s.",
    "session.keepalive_failed": lambda r: f"{value(r, 'node')}'s keep-alive fails: {value(r, 'error')}.",
    "session.exit": _exit,
    "client.request": lambda r: f"{value(r, 'node')} asks {value(r, 'peer')} for "
                                f"{plural(value(r, 'count'), 'timestamp')}.",
    "client.recv": lambda r: f"{value(r, 'node')} receives {plural(value(r, 'count'), 'timestamp')} starting at "
                             f"{ts_text(value(r, 'ts'))} from {value(r, 'peer')}.",
    "client.error": lambda r: f"{value(r, 'node')}'s request failed: {value(r, 'error')}.",
}
