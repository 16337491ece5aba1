"""Why did a pchannel's time tick stop? The TimeTick lesson's part of the causal chain (:mod:`milvus_edu.explain`).

Rootcoord writes a round of time ticks only once every proxy session it knows has reported
(``timetickSync.updateTimeTick`` / ``sendToChannel``); a session it waits for holds every pchannel's tick. That
session stays registered until rootcoord drops it (``timetickSync.delSession``), which for a crashed proxy happens
only when its etcd lease expires. Two questions: ``tick-stopped`` (which session rootcoord waited for) and
``session-held`` (why that session did not report: the fault injected on it, and when its session went away).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from ...explain import Answer, Link, Question
from ...narrate import describe, detail_dict


def _window(events: pd.DataFrame, after_seq: int, until_seq) -> pd.DataFrame:
    """The events after ``after_seq`` and before ``until_seq`` (the run's end when ``None``)."""
    seq = events["seq"]
    inside = seq > after_seq
    if until_seq is not None:
        inside &= seq < int(until_seq)
    return events[inside]


def explain_tick_stopped(events: pd.DataFrame, subject) -> Answer:
    """Answer "why did no time tick reach ``subject['pchannel']`` between events ``after_seq`` and ``until_seq``?":
    the session rootcoord's timetick sync waited for, handed on as a ``session-held`` question."""
    pchannel, after, until = str(subject["pchannel"]), int(subject["after_seq"]), subject.get("until_seq")
    window = _window(events, after, until)
    updates = window[(window["kind"] == "rootcoord.timetick_update") & window["error"].isna()]
    end_ms = (float(events.loc[events["seq"] == int(until), "t_ms"].iloc[0]) if until is not None
              else float(events["t_ms"].iloc[-1]))
    start_ms = float(events.loc[events["seq"] == after, "t_ms"].iloc[0])
    span = f"from {start_ms / 1000:.3f} s to {end_ms / 1000:.3f} s"
    if not len(updates):
        anchor = events[events["seq"] == after].iloc[0]
        return Answer((Link.of(anchor, f"rootcoord's timetick sync took no report at all {span}, so it wrote no tick "
                                       f"to {pchannel}"),))
    waiting: Counter = Counter()
    first: dict[str, object] = {}
    unsent = 0
    for _, row in updates.iterrows():
        detail = detail_dict(row["detail"])
        if detail.get("sent") is not False:
            continue
        unsent += 1
        for name in dict.fromkeys(str(n) for n in detail.get("waiting_for") or ()):
            waiting[name] += 1
            first.setdefault(name, row)
    if not waiting:
        anchor = updates.iloc[0]
        return Answer((Link.of(anchor, f"rootcoord sent rounds of time ticks {span}, but the sessions' minimum for "
                                       f"{pchannel} did not pass its last tick"),))
    name, count = waiting.most_common(1)[0]
    row = first[name]
    text = (f"rootcoord wrote no time tick to {pchannel} {span}: it writes a round only once every proxy session has "
            f"reported, and {unsent:,} of its {len(updates):,} updates in that time went unsent, {count:,} of them "
            f"waiting for a report from {name}")
    return Answer((Link.of(row, text),), Question("session-held", {"session": name, "from_seq": int(row["seq"]),
                                                                 "until_seq": until}))


def explain_session_held(events: pd.DataFrame, subject) -> Answer:
    """Answer "why did ``subject['session']`` not report from event ``from_seq`` on (until ``until_seq``)?": the last
    fault injected on that proxy before the ticks came back, and how long its session stayed registered (until its
    lease expired and rootcoord dropped it)."""
    name, from_seq, until = str(subject["session"]), int(subject["from_seq"]), subject.get("until_seq")
    # The fault may come after the first unsent round that waited for this session (a round waits for every
    # session's report, so one opened just before the crash waits for it too): look up to the tick that came back.
    faults = events[events["kind"].astype(str).str.startswith("fault.") & (events["node"] == name)
                    & ~events["kind"].isin(["fault.restart", "fault.resume"])]
    if until is not None:
        faults = faults[faults["seq"] < int(until)]
    if not len(faults):
        row = events[events["seq"] == from_seq].iloc[0]
        return Answer((Link.of(row, f"no fault injected on {name} explains why its report was missing"),))
    fault = faults.iloc[-1]
    detail = detail_dict(fault["detail"])
    if fault["kind"] == "fault.pause":
        return Answer((Link.of(fault, f"{name} was paused (a GC or VM pause) at {fault['t_ms'] / 1000:.3f} s for "
                                      f"{float(detail.get('duration_ms') or 0) / 1000:.3f} s, and sent no report while it "
                                      f"lasted"),))
    if fault["kind"] != "fault.kill":
        return Answer((Link.of(fault, f"{describe(fault)} {name} sent no report while it lasted"),))
    server = detail.get("server_id")
    later = events[events["seq"] > int(fault["seq"])]
    lost = later[(later["kind"] == "session.lost")
                 & later["detail"].fillna("").str.contains(f"/{name.split('-')[0]}-{server}\"", regex=False)]
    dropped = later[(later["kind"] == "rootcoord.session_del") & (later["peer"] == name)]
    restarts = later[(later["kind"] == "fault.restart") & (later["node"] == name)]
    if until is not None:
        restarts = restarts[restarts["seq"] < int(until)]
    again = ""
    if len(restarts):
        r = restarts.iloc[0]
        again = (f", although {name} had restarted at {r['t_ms'] / 1000:.3f} s (event {int(r['seq']) + 1:,}) as a new "
                 f"session (server id {detail_dict(r['detail']).get('server_id')}): rootcoord waits for every "
                 f"registered session, the dead one too")
    links = []
    if len(lost):
        row = lost.iloc[0]
        key = detail_dict(row["detail"]).get("key")
        drop = (f", and rootcoord stopped waiting for it at event {int(dropped.iloc[0]['seq']) + 1:,}"
                if len(dropped) else "")
        links.append(Link.of(row, f"{name}'s old session ({key}) stayed registered until its lease expired at "
                                  f"{row['t_ms'] / 1000:.3f} s{drop}{again}"))
    else:
        links.append(Link.of(fault, f"{name}'s old session (server id {server}) was still registered when the run ended "
                                    f"at {float(events['t_ms'].iloc[-1]) / 1000:.3f} s: it goes only when its lease "
                                    f"expires{again}"))
    links.append(Link.of(fault, f"{name} (server id {server}) was killed at {fault['t_ms'] / 1000:.3f} s and its "
                                f"session sent no report after it"))
    return Answer(tuple(links))


EXPLAINERS = {"tick-stopped": explain_tick_stopped, "session-held": explain_session_held}
