"""Why did a timestamp go back? The TSO lesson's part of the causal chain (:mod:`milvus_edu.explain`).

A TSO violation's evidence is two allocations (or one allocation past the saved window); the checker says *that*
an invariant broke. This module says *why*, from the run log: which rootcoord's window started too low and where
that start came from (``timestampOracle.InitTimestamp`` starts past the window end saved in etcd; a switch may skip
that), whether the earlier active handed out timestamps past the window end it had saved
(``timestampOracle.UpdateTimestamp`` re-saves the window before the physical part reaches it), and the failover
that put the second rootcoord in charge: its ``session.active``, the old active's session expiring, and the fault
injected on the old active.

Questions: ``violation:global-monotonic``, ``violation:client-monotonic`` and ``violation:window``
(:data:`milvus_edu.explain.violation.VIOLATION_QUESTION`), each with the subject ``{"seqs": [...]}``, the events
the violation rests on.
"""

from __future__ import annotations

import pandas as pd

from ...explain import Answer, Link
from ...explain.violation import VIOLATION_QUESTION
from ...narrate import detail_dict, wall_text
from .check import INVARIANTS

#: The last part of rootcoord's ACTIVE key (``sessionutil.active_key``: ``by-dev/meta/session/rootcoord``).
ACTIVE_KEY_NAME = "rootcoord"


def _row(events: pd.DataFrame, seq: int):
    return events[events["seq"] == seq].iloc[0]


def _last(events: pd.DataFrame, before: int, node: str, *kinds: str):
    """The last event of one of ``kinds`` on ``node`` before event ``before``, or ``None``."""
    rows = events[(events["seq"] < before) & (events["node"] == node) & events["kind"].isin(kinds)]
    return rows.iloc[-1] if len(rows) else None


def _switches(events: pd.DataFrame) -> list[str]:
    """The bug switches on in the run at some time: from the start, or turned on part-way (``fault.switch``)."""
    start = events[events["kind"] == "run.start"]
    on = list(detail_dict(start.iloc[0]["detail"]).get("switches") or ()) if len(start) else []
    for detail in events.loc[events["kind"] == "fault.switch", "detail"]:
        flip = detail_dict(detail)
        if flip.get("on") and flip.get("switch") not in on:
            on.append(flip.get("switch"))
    return on


def _allocator(row) -> str:
    """The rootcoord behind an evidence event: the node of an allocation, the peer of a client's answer."""
    return str(row["peer"]) if str(row["kind"]).startswith("client.") else str(row["node"])


def _failover(events: pd.DataFrame, node: str, before: int, old: str) -> list[Link]:
    """How ``node`` came to be the active rootcoord before event ``before``: its ``session.active``, the old
    active's session expiring, the fault injected on ``old``. Empty when ``node`` was active from the start."""
    active = _last(events, before + 1, node, "session.active")
    if active is None or float(active["t_ms"]) == 0.0:
        return []
    links = [Link.of(active, f"{node} became the active rootcoord at {active['t_ms'] / 1000:.3f} s, so its "
                             f"InitTimestamp chose where the next timestamps start")]
    lost = events[(events["seq"] < int(active["seq"])) & (events["kind"] == "session.lost")]
    # the old active's keys only (its own session and the ACTIVE key it held), not another node's lease running out
    lost = lost[[str(detail_dict(d).get("key", "")).rsplit("/", 1)[-1] in (old, ACTIVE_KEY_NAME) for d in lost["detail"]]]
    faults = events[(events["seq"] < int(active["seq"])) & (events["node"] == old)
                    & events["kind"].isin(["fault.kill", "fault.pause"])]
    if len(lost):
        row = lost.iloc[-1]
        keys = ", ".join(str(detail_dict(d).get("key")) for d in lost[lost["t_ms"] == row["t_ms"]]["detail"])
        links.append(Link.of(row, f"{old}'s lease ran out at {row['t_ms'] / 1000:.3f} s: etcd deleted its session keys "
                                  f"({keys}) and {node}, the standby, won the election"))
    if len(faults):
        row = faults.iloc[-1]
        verb = "killed" if row["kind"] == "fault.kill" else "paused"
        links.append(Link.of(row, f"{old} was {verb} at {row['t_ms'] / 1000:.3f} s and stopped renewing its lease"))
    return links


def explain_went_back(events: pd.DataFrame, subject) -> Answer:
    """Answer "why was a later timestamp not above an earlier one?" (``global-monotonic`` or ``client-monotonic``):
    where the later rootcoord's window started, why that was not past the earlier one's timestamps, and the
    failover in between."""
    seqs = sorted(int(s) for s in subject["seqs"])
    earlier, later = _row(events, seqs[0]), _row(events, seqs[-1])
    old, new = _allocator(earlier), _allocator(later)
    links: list[Link] = []
    init = _last(events, seqs[-1], new, "tso.init")
    if init is None:
        return Answer((Link.of(later, f"no InitTimestamp of {new} is in the run log before this answer"),))
    detail = detail_dict(init["detail"])
    start = int(init["physical_ms"])
    if detail.get("bug_switch") == "tso_skip_load_on_init":
        links.append(Link.of(init, f"{new}'s InitTimestamp started its window at its own clock, {wall_text(start)}, "
                                   f"ignoring the window end {wall_text(int(detail.get('ignored_window_end_ms') or 0))} "
                                   f"saved in etcd (bug switch tso_skip_load_on_init); Milvus starts past the saved end "
                                   f"(timestampOracle.InitTimestamp), which lies above every timestamp handed out"))
    else:
        loaded = int(detail.get("loaded_window_end_ms") or 0)
        links.append(Link.of(init, f"{new}'s InitTimestamp started its window at {wall_text(start)}, just past the "
                                   f"window end {wall_text(loaded)} saved in etcd, which lay below timestamps already handed out"))
        alloc = _last(events, seqs[0] + 1, old, "tso.alloc")
        save = _last(events, seqs[0] + 1, old, "tso.save")
        if alloc is not None and save is not None and int(alloc["physical_ms"]) >= int(save["window_end_ms"]):
            switch = (" (bug switch tso_no_window_save)" if "tso_no_window_save" in _switches(events) else "")
            links.append(Link.of(alloc, f"{old} had handed out timestamps on physical {wall_text(int(alloc['physical_ms']))}"
                                        f", at or past the window end {wall_text(int(save['window_end_ms']))} it last saved "
                                        f"(event {int(save['seq']) + 1:,}): its UpdateTimestamp did not re-save the "
                                        f"window before the physical part reached it{switch}"))
    links.extend(_failover(events, new, int(init["seq"]), old))
    return Answer(tuple(links))


def explain_window(events: pd.DataFrame, subject) -> Answer:
    """Answer "why did an allocation pass the saved window end?": the node's last save and its UpdateTimestamp
    calls that moved the physical part on without saving."""
    seq = max(int(s) for s in subject["seqs"])
    alloc = _row(events, seq)
    node = str(alloc["node"])
    save = _last(events, seq, node, "tso.save")
    switch = " (bug switch tso_no_window_save)" if "tso_no_window_save" in _switches(events) else ""
    if save is None:
        return Answer((Link.of(alloc, f"{node} never saved a window before this allocation{switch}"),))
    updates = events[(events["seq"] > int(save["seq"])) & (events["seq"] < seq) & (events["node"] == node)
                     & (events["kind"] == "tso.update")]
    moved = f"{len(updates):,} UpdateTimestamp calls" if len(updates) else "no UpdateTimestamp call"
    return Answer((Link.of(save, f"{node} last saved the window end {wall_text(int(save['window_end_ms']))} at "
                                 f"{save['t_ms'] / 1000:.3f} s; {moved} since moved the physical part to "
                                 f"{wall_text(int(alloc['physical_ms']))} without saving again, where Milvus re-saves "
                                 f"once the window end is within updateTimestampGuard of it "
                                 f"(timestampOracle.UpdateTimestamp){switch}"),))


EXPLAINERS = {VIOLATION_QUESTION.format(invariant=name): (explain_window if name == "window" else explain_went_back)
              for name in INVARIANTS}
