"""Why did a flush take as long as it did? The flush lesson's part of the causal chain (:mod:`milvus_edu.explain`).

A client's flush gets flushTs from DataCoord's ``Flush`` (which seals the growing segments and hands flushTs to the
DataNode: ``FlushChannels``) and then polls ``GetFlushState``, which says flushed once two things hold
(``Server.GetFlushState``): every sealed segment is Flushing or Flushed in DataCoord's meta (its last sync was
recorded by ``SaveBinlogPaths``), and every channel checkpoint DataCoord stored (``UpdateChannelCheckpoint``) has
reached flushTs. The condition that held last is what the flush waited for; the chain walks back from it along
what had to happen first (the sync task's object store writes and ``SaveBinlogPaths``, the ttNode handing the
checkpoint to the updater, the updater's RPC) and ends at the step that cost the most: a DataNode that crashed and
had to recover, an RPC that failed and was sent again, a slow object store, or the wait for the next time tick.
Every clause is read off the run log; nothing is tied to a scenario.
"""

from __future__ import annotations

import pandas as pd

from ...explain import Answer, Link, Question, WhyError
from ...explain.violation import VIOLATION_QUESTION
from ...narrate import detail_dict, plural, ts_text

#: The segment states in which GetFlushState counts a segment as flushed (``isFlushState``).
FLUSH_STATES = ("Flushing", "Flushed")
#: A sync task's object store writes slower than this are a slow store: a healthy store writes a segment's binlogs
#: in milliseconds (the model's default store_latency_ms is 5 ms per write), a time tick is 200 ms.
SLOW_WRITE_MS = 500.0
# How the causes rank, most telling first: a crash explains more than a checkpoint that never reached flushTs, that
# more than a failed RPC, a failed RPC more than a slow store, and all of them more than the ordinary wait for the
# next time tick; within a rank the costliest wins.
#: The rank of a DataNode's crash (the most telling cause).
CRASH = 0
#: The rank of a channel checkpoint that never reached flushTs (a sync not stored, or not asked for yet).
STUCK = 1
#: The rank of a failed RPC (SaveBinlogPaths or UpdateChannelCheckpoint, retried until it went through).
FAILED_RPC = 2
#: The rank of a slow object store (a sync task's writes slower than :data:`SLOW_WRITE_MS`).
SLOW_STORE = 3
#: The rank of the ordinary wait for the next time tick (the least telling cause).
TICK_WAIT = 4


def _s(row) -> str:
    return f"{float(row['t_ms']) / 1000:.3f} s"


def flush_starts(events: pd.DataFrame) -> pd.DataFrame:
    """The client flushes in the order they were issued: each ``client.flush`` that is not the "flushed" report."""
    rows = events[events["kind"] == "client.flush"]
    return rows[[detail_dict(d).get("flushed") is not True for d in rows["detail"]]]


def ask_flush(events: pd.DataFrame, i: int) -> dict | None:
    """The question a ``client.flush`` poses (the explorer's Why?): why did that flush take so long (or fail), counted
    among the client flushes from 1; the "flushed" report asks about the flush it reports (same client, same flushTs).
    A call is found by its own event: one that failed has no flushTs to be matched by."""
    row = events.iloc[i]
    issued = flush_starts(events)
    seqs = issued["seq"].to_numpy()
    if (seqs == row["seq"]).any():
        return {"flush": int((seqs == row["seq"]).argmax()) + 1}
    same = issued[(issued["node"] == row["node"]) & (issued["ts"] == row["ts"]) & (issued["seq"] <= row["seq"])]
    if not len(same):
        return None
    return {"flush": int((issued["seq"].to_numpy() == same["seq"].iloc[0]).argmax()) + 1}


ASKS = {"client.flush": ask_flush}


def _done(events: pd.DataFrame, start) -> object | None:
    """The ``client.flush`` saying ``start``'s flush is flushed (same client, same flushTs); ``None``: never."""
    rows = events[(events["kind"] == "client.flush") & (events["seq"] > int(start["seq"]))
                  & (events["node"] == start["node"]) & (events["ts"] == start["ts"])]
    rows = rows[[detail_dict(d).get("flushed") is True for d in rows["detail"]]]
    return rows.iloc[0] if len(rows) else None


def _vchannels(events: pd.DataFrame, flush_ts: int, start_seq: int) -> list[str]:
    """The vchannels the flush waits on: those FlushChannels set flushTs on (``datanode.flush_ts``), else those of
    the channel checkpoints DataCoord held before the flush."""
    set_rows = events[(events["kind"] == "datanode.flush_ts") & (events["ts"] == flush_ts)]
    set_rows = set_rows[[detail_dict(d).get("set") is True for d in set_rows["detail"]]]
    names = set_rows["vchannel"].dropna()
    if not len(names):
        names = events[(events["kind"] == "datacoord.channel_cp") & (events["seq"] < start_seq)]["vchannel"].dropna()
    return sorted({str(v) for v in names})


def _positions(row) -> dict:
    return detail_dict(row["detail"]).get("positions") or {}


def explain_flush(events: pd.DataFrame, subject) -> Answer:
    """Answer "why did flush ``subject['number']`` (1-based, in the order the clients issued them) take as long as it
    did?": the GetFlushState that said flushed, the condition that held last, what it waited for, and the costliest
    step on that path. ``WhyError`` for a flush number not in the run."""
    number = int(subject["number"])
    starts = flush_starts(events)
    if not 1 <= number <= len(starts):
        have = ("no client flushed in it" if not len(starts) else "it holds one flush, number 1" if len(starts) == 1
                else f"its flushes are numbered 1 to {len(starts)}")
        raise WhyError(f"there is no flush {number} in this run: {have} (flushes are counted from 1 in the order the "
                       f"clients issued them; `milvus-edu timeline RUN --all` shows them)")
    start = starts.iloc[number - 1]
    if pd.notna(start["error"]):
        return Answer((Link.of(start, f"flush {number} failed: {start['error']}"),), title=f"Why did flush {number} fail?")
    flush_ts, start_seq = int(start["ts"]), int(start["seq"])
    # The client's flush began when DataCoord's Flush got flushTs from rootcoord; the client.flush row is written
    # when Flush returns, which waits for FlushChannels on the channel's DataNode (long, when that node is dead).
    allocs = events[(events["kind"] == "rootcoord.alloc_timestamp") & (events["ts"] == flush_ts)
                    & (events["seq"] < start_seq)]
    begin = allocs.iloc[0] if len(allocs) else start
    begin_seq, t0 = int(begin["seq"]), float(begin["t_ms"])
    segments = [int(s) for s in detail_dict(start["detail"]).get("segments") or ()]
    done = _done(events, start)
    end_seq = int(done["seq"]) if done is not None else int(events["seq"].iloc[-1]) + 1
    window = events[(events["seq"] > begin_seq) & (events["seq"] < end_seq)]

    conditions = _conditions(events, window, flush_ts, begin_seq, segments)
    took_ms = (float(done["t_ms"]) if done is not None else float(events["t_ms"].iloc[-1])) - t0
    seg_text = ", ".join(str(s) for s in segments) or "none"
    if done is not None:
        first = Link.of(done, f"flush {number} by {start['node']} (flushTs {ts_text(flush_ts)}, sealed segments "
                              f"{seg_text}) took {took_ms:,.0f} ms: GetFlushState said flushed here, at the client's "
                              f"first poll after every sealed segment was Flushing or Flushed and every channel "
                              f"checkpoint had reached flushTs")
    else:
        first = Link.of(events.iloc[-1], f"flush {number} by {start['node']} (flushTs {ts_text(flush_ts)}, sealed "
                                         f"segments {seg_text}) had not finished when the run ended, {took_ms:,.0f} ms "
                                         f"after it began")
    # a flush still waiting when the run ended did not "take" its time: the question says it never finished
    title = (f"Why did flush {number} take {took_ms:,.0f} ms?" if done is not None else
             f"Why had flush {number} not finished when the run ended, {took_ms:,.0f} ms after it began?")
    links = [first]
    held = [(name, row) for name, _, _, row in conditions if row is not None]
    path: list[tuple[object, str]] = []
    causes: list[tuple[int, float, object, str]] = []
    missing = [(name, vchannel, segment) for name, vchannel, segment, row in conditions if row is None]
    if missing:
        _missing(events, window, missing, flush_ts, begin_seq, end_seq, path, causes)
    elif held:
        gate = max(held, key=lambda item: int(item[1]["seq"]))[1]
        if gate["kind"] == "datacoord.channel_cp":
            _channel_path(window, gate, flush_ts, len(held), t0, path, causes)
        else:
            _segment_path(window, gate, len(held), t0, path, causes)
    links.extend(Link.of(row, text) for row, text in path)
    # where the flush began: each as a link, and as a clause for a root cause found later (see below)
    began: list[tuple[Link, str]] = []
    flushed = events[(events["kind"] == "datacoord.flush") & (events["ts"] == flush_ts) & (events["seq"] <= start_seq)]
    if len(flushed):
        row = flushed.iloc[-1]
        sealed = ", ".join(str(s) for s in detail_dict(row["detail"]).get("sealed") or ()) or "none"
        began.append((Link.of(row, f"DataCoord's Flush sealed segments {sealed}, handed flushTs to the DataNode "
                                   f"(FlushChannels) and returned here, {float(row['t_ms']) - t0:,.0f} ms after it "
                                   f"got flushTs"),
                      f"DataCoord's Flush sealed segments {sealed} and handed flushTs to the DataNode"))
    if begin is not start:
        began.append((Link.of(begin, f"rootcoord allocated flushTs {ts_text(flush_ts)} here for DataCoord's Flush"),
                      f"rootcoord allocated flushTs {ts_text(flush_ts)}"))
    links.extend(link for link, _ in began)
    _crash_causes(events, begin_seq, end_seq, t0, causes)
    if not causes and done is None:
        # a flush that never finished did not wait "the ordinary round": say only what the log does not show
        links.append(Link.of(begin, "no crash, failed RPC or slow write in the run log explains why the flush that "
                                    "began here never finished"))
        return Answer(tuple(links), title=title)
    if not causes:
        links.append(Link.of(begin, "nothing on the way failed or stood out: the flush waited the ordinary round of "
                                    "the DataNode's time tick, syncs and checkpoint updates after flushTs was "
                                    "allocated here"))
        return Answer(tuple(links), title=title)
    _, _, row, text = min(causes, key=lambda c: (c[0], -c[1]))
    root = Link.of(row, text)
    # the chain walks back in time to its root: where the flush began comes before a root cause found later on its
    # way, so it is said in the root's clause rather than as links that would read "because ..., because [a later
    # event]"
    before = [(link, clause) for link, clause in began if link.seq < root.seq]
    if before:
        root = Link.of(row, text + "; the flush had begun before it: " + ", after ".join(
            f"{clause} at {link.t_ms / 1000:.3f} s (event {link.seq + 1:,})" for link, clause in before))
    dropped = {link.seq for link, _ in before} | {root.seq}
    links = [link for link in links if link.seq not in dropped] + [root]
    return Answer(tuple(links), title=title)


def _missing(events, window, missing, flush_ts, begin_seq, end_seq, path, causes):
    """A flush that never finished: for each channel whose checkpoint never reached flushTs, the last checkpoint
    the ttNode handed over, which stays at the start of the oldest data still in memory or in a sync, and, when the
    log shows quirk P24 on that channel (:func:`_unsyncable_l0`), the L0 segment whose deletes no sync can take; for
    each sealed segment that never became Flushing or Flushed, what the log shows of it (:func:`_segment_stuck`)."""
    segments = [name for name, _, segment in missing if segment is not None]
    if segments:  # named even when a crash outranks them as the root cause
        path.append((window.iloc[-1], f"{', '.join(segments)} never held before the run ended"))
    for name, vchannel, segment in missing:
        if segment is not None:
            causes.append(_segment_stuck(events, window, segment, begin_seq, end_seq))
            continue
        if vchannel is None:
            continue
        handed = window[(window["kind"] == "datanode.checkpoint") & (window["vchannel"] == vchannel)]
        orphan = _unsyncable_l0(events, vchannel, end_seq)
        if orphan is None and not len(handed):
            continue
        if len(handed):
            last = handed.iloc[-1]
            where = "here" if orphan is None else f"at {_s(last)} (event {int(last['seq']) + 1:,})"
            stuck = (f"{name} never held: the DataNode's ttNode never handed the updater a checkpoint of {vchannel} at "
                     f"or past flushTs; its last, {where}, was {ts_text(int(last['ts']))}, below flushTs "
                     f"{ts_text(flush_ts)}: a channel checkpoint stays at the start of the oldest data still in the "
                     f"DataNode's buffers or in a sync")
        else:
            stuck = (f"{name} never held: the DataNode's ttNode handed the updater no checkpoint of {vchannel} during "
                     f"the flush, and a channel checkpoint stays at the start of the oldest data still in the "
                     f"DataNode's buffers or in a sync")
        if orphan is None:
            causes.append((STUCK, float(last["t_ms"]), last, stuck))
            continue
        synced = orphan["sync"]
        segment = int(synced["segment"])
        shows = []
        if orphan["chosen"]:
            first = orphan["first_chosen"]
            shows.append(f"the sync policies chose segment {segment} {orphan['chosen']:,} "
                         f"time{'s' if orphan['chosen'] > 1 else ''} after that (the first at {_s(first)}, event "
                         f"{int(first['seq']) + 1:,}), and it was never synced again")
        if orphan["deletes"]:
            first = orphan["first_delete"]
            shows.append(f"{plural(orphan['deletes'], 'delete')} came to {vchannel} after it (the first at {_s(first)}, "
                         f"event {int(first['seq']) + 1:,}) and no L0 segment of the channel was synced again")
        # ranked by its latest evidence, as the checkpoint it explains would be; the link is the sync
        latest = max(float(r["t_ms"]) for r in (last if len(handed) else None, orphan["first_chosen"],
                                                  orphan["first_delete"], synced) if r is not None)
        causes.append((STUCK, latest, synced,
                       f"{stuck}. On {vchannel} deletes are left in a buffer no sync can take: segment {segment}, the "
                       f"L0 segment that holds the partition's deletes, was synced here by the memory check "
                       f"(EvictBuffer, policy \"oldest buffers\"), so it left the DataNode's segment cache; but the "
                       f"write buffer still sends the partition's next deletes to it, because Milvus 2.5's EvictBuffer "
                       f"never forgets a synced L0 segment (only BufferData does: quirk P24). The log shows it: "
                       + "; and ".join(shows)))
    if not causes:
        path.append((window.iloc[-1], f"{', '.join(name for name, _, _ in missing)} never held before the run ended"))


def _unsyncable_l0(events, vchannel, end_seq):
    """Quirk P24 as the log shows it on ``vchannel`` before ``end_seq``: an L0 segment the memory check synced
    (``EvictBuffer``, the policy "oldest buffers") and never synced again, while the sync policies chose it again (it
    has a buffer once more) or deletes came to the channel with no L0 segment synced there after it. The earliest such
    sync as ``{"sync": row, "chosen": times the policies chose the segment after it, "first_chosen": row or None,
    "deletes": deletes buffered after it (0 once another L0 segment of the channel was synced), "first_delete": row or
    None}``, or None."""
    rows = events[(events["seq"] < end_seq) & (events["vchannel"] == vchannel)
                  & events["kind"].isin(["datanode.sync", "datanode.sync_policy", "datanode.buffer", "datanode.watch"])]
    evicting: set[int] = set()  # segments the memory check chose, until their sync
    left: dict[int, dict] = {}  # segment -> what came after the memory check's L0 sync of it, while not synced again
    for _, row in rows.iterrows():
        detail = detail_dict(row["detail"])
        if row["kind"] == "datanode.watch":  # a DataNode (re)starts the channel: its write buffer starts empty
            evicting.clear()
            left.clear()
        elif row["kind"] == "datanode.sync_policy":
            segments = set(map(int, detail.get("segments") or ()))
            if detail.get("reason") == "oldest buffers":
                evicting |= segments
            for segment in segments & left.keys():
                left[segment]["chosen"] += 1
                if left[segment]["first_chosen"] is None:
                    left[segment]["first_chosen"] = row
        elif row["kind"] == "datanode.sync":
            if detail.get("level") != "L0" or pd.isna(row["segment"]):
                continue
            segment = int(row["segment"])
            left.pop(segment, None)  # synced again: nothing of it is left behind
            for other in left.values():  # later deletes may have gone out with this one
                other["deletes"], other["first_delete"], other["counting"] = 0, None, False
            if segment in evicting:
                left[segment] = {"sync": row, "chosen": 0, "first_chosen": None, "deletes": 0, "first_delete": None,
                                 "counting": True}
            evicting.discard(segment)
        elif int(detail.get("deletes") or 0):
            for found in left.values():
                if found["counting"]:
                    found["deletes"] += int(detail["deletes"])
                    if found["first_delete"] is None:
                        found["first_delete"] = row
    shown = [f for f in left.values() if f["chosen"] or f["deletes"]]
    return min(shown, key=lambda f: int(f["sync"]["seq"])) if shown else None


def _segment_stuck(events, window, segment, begin_seq, end_seq):
    """Why a sealed segment had not become Flushing or Flushed when the run ended, from what the log holds of it:
    DataCoord asked a DataNode to flush it but no flushed sync of it was recorded; or no sync of it was stored (lost
    in a crash, or still on its way), so DataCoord's meta counts no rows in it and ``flushPolicyL1`` does not let it
    go; or DataCoord had not asked for it yet. A ``STUCK`` cause; it claims "never" only for a sync a crash lost."""
    name = f"segment {segment} had not become Flushing or Flushed when the run ended"
    asked = window[window["kind"] == "datacoord.flush_segments"]
    asked = asked[[segment in (detail_dict(d).get("segments") or ()) for d in asked["detail"]]]
    before = events[(events["seq"] < end_seq) & (events["segment"] == segment)]
    stored = before[(before["kind"] == "datacoord.save_binlog_paths") & before["error"].isna()]
    cuts = before[before["kind"] == "datanode.sync"]
    no_rows = ("so DataCoord's meta counts no rows in it, and DataCoord asks a DataNode to flush a sealed segment only "
               "once its rows are counted (flushPolicyL1: NumOfRows != 0)")
    if len(asked):
        a = asked.iloc[-1]
        return (STUCK, float(a["t_ms"]), a,
                f"{name}: DataCoord last asked {a['peer']} to flush it here, at {_s(a)}, but no SaveBinlogPaths had "
                f"recorded a flushed sync of it")
    if not len(stored) and len(cuts):
        cut = cuts.iloc[-1]
        kills = events[(events["kind"] == "fault.kill") & (events["node"] == cut["node"])
                       & (events["seq"] > int(cut["seq"])) & (events["seq"] < end_seq)]
        if len(kills):
            kill = kills.iloc[0]
            # "for good" only when the log shows it: the channel watched again from a checkpoint past the lost data
            oldest = None if pd.isna(cut["begin_ts"]) else int(cut["begin_ts"])
            watches = events[(events["kind"] == "datanode.watch") & (events["vchannel"] == cut["vchannel"])
                             & (events["seq"] > int(kill["seq"])) & (events["seq"] < end_seq)]
            past = ""
            if oldest is not None and len(watches) and int(watches.iloc[0]["ts"]) > oldest:
                w = watches.iloc[0]
                past = (f"; {w['node']} watched {w['vchannel']} again from checkpoint {ts_text(int(w['ts']))} (event "
                        f"{int(w['seq']) + 1:,}), past the sync's oldest row ({ts_text(oldest)}), so it never "
                        f"read that sync's rows again")
            return (STUCK, float(cut["t_ms"]), cut,
                    f"{name}: its last sync, cut here at {_s(cut)}, never reached DataCoord ({cut['node']} crashed at "
                    f"{_s(kill)}, event {int(kill['seq']) + 1:,}, before any SaveBinlogPaths of segment {segment} "
                    f"was stored), {no_rows}{past}")
        return (STUCK, float(cut["t_ms"]), cut,
                f"{name}: its last sync, cut here at {_s(cut)}, had not reached DataCoord (no SaveBinlogPaths of "
                f"segment {segment} was stored yet), {no_rows}")
    if not len(stored):
        sealed = window[window["kind"] == "datacoord.flush"]
        row = sealed.iloc[-1] if len(sealed) else events[events["seq"] == begin_seq].iloc[0]
        return (STUCK, 0.0, row, f"{name}: no sync of it had been stored yet, {no_rows}")
    last = stored.iloc[-1]
    return (STUCK, float(last["t_ms"]), last,
            f"{name}: DataCoord had not asked a DataNode to flush it, which it does only on a DataNode time tick past "
            f"the expiry of the segment's last row allocation (dataCoord.segment.assignmentExpiration, 2 s) and at "
            f"least dataCoord.segmentFlushInterval (2 s) after it last asked (flushPolicyL1); its last stored sync "
            f"(SaveBinlogPaths) was here, at {_s(last)}")


def _conditions(events, window, flush_ts, start_seq, segments):
    """GetFlushState's conditions as ``(name, vchannel or None, segment or None, event that made it hold)``; the event
    is ``None`` when it never held during the flush. A segment already Flushing or Flushed before the flush is not a condition."""
    out = []
    for segment in segments:
        rows = window[(window["segment"] == segment) & window["error"].isna()
                      & window["kind"].isin(["datacoord.save_binlog_paths", "datacoord.segment_state"])]
        rows = rows[[detail_dict(d).get("state") in FLUSH_STATES for d in rows["detail"]]]
        out.append((f"segment {segment} Flushing or Flushed", None, segment, rows.iloc[0] if len(rows) else None))
    for vchannel in _vchannels(events, flush_ts, start_seq):
        rows = window[(window["kind"] == "datacoord.channel_cp") & (window["vchannel"] == vchannel)
                      & window["error"].isna() & (window["ts"] >= flush_ts)]
        rows = rows[[detail_dict(d).get("saved") is True for d in rows["detail"]]]
        out.append((f"the checkpoint of {vchannel} at flushTs", vchannel, None, rows.iloc[0] if len(rows) else None))
    return out


def _channel_path(window, gate, flush_ts, count, t0, path, causes):
    """The checkpoint that reached flushTs last: its RPC, the failed RPCs before it, the ttNode handing it over and
    the sync it had to wait for."""
    vchannel, ts = str(gate["vchannel"]), int(gate["ts"])
    path.append((gate, f"the last of the flush's {count} conditions to hold: DataCoord stored {vchannel}'s checkpoint "
                       f"{ts_text(ts)}, at or past flushTs, here (UpdateChannelCheckpoint from {gate['peer']})"))
    before = window[window["seq"] <= int(gate["seq"])]
    rpcs = before[before["kind"] == "datanode.cp_rpc"]
    carrying = rpcs[[vchannel in _positions(r) and int(_positions(r)[vchannel]) >= flush_ts
                     for _, r in rpcs.iterrows()]]
    failed = carrying[carrying["error"].notna()]
    handed = before[(before["kind"] == "datanode.checkpoint") & (before["vchannel"] == vchannel)
                    & (before["ts"] >= flush_ts)]
    if len(failed):
        f = failed.iloc[0]
        causes.append((FAILED_RPC, float(gate["t_ms"]) - float(f["t_ms"]), f,
                       f"the first UpdateChannelCheckpoint that carried {vchannel} past flushTs failed here "
                       f"({f['error']}); the checkpoint updater keeps a failed task and sends it again "
                       f"(ChannelCheckpointUpdater.updateCheckpoints), so the checkpoint reached DataCoord only "
                       f"{float(gate['t_ms']) - float(f['t_ms']):,.0f} ms later, at {_s(gate)}, after "
                       f"{len(failed):,} failed RPC{'s' if len(failed) > 1 else ''}"))
    if len(handed):
        h = handed.iloc[0]
        path.append((h, f"the DataNode's ttNode handed {vchannel}'s checkpoint {ts_text(int(h['ts']))} to the "
                        f"checkpoint updater here ({_why_handed(h)})"))
        syncs = before[(before["kind"] == "datanode.sync_done") & (before["vchannel"] == vchannel)
                       & (before["seq"] < int(h["seq"]))]
        if len(syncs):
            last = syncs.iloc[-1]
            path.append((last, f"the checkpoint never passes data still being synced: the last sync on {vchannel} "
                               f"before it, of segment {int(last['segment'])}, finished here"))
            _sync_cost(window, last, causes)
        causes.append((TICK_WAIT, float(h["t_ms"]) - t0, h,
                       f"the flush waited for the DataNode's flowgraph to carry {vchannel} past flushTs: its ttNode "
                       f"handed a checkpoint at or past flushTs to the updater only here, "
                       f"{float(h['t_ms']) - t0:,.0f} ms into the flush, on the first "
                       f"pack whose time tick passed flushTs with no older data left to sync"))


def _why_handed(row) -> str:
    detail = detail_dict(row["detail"])
    if detail.get("flush"):
        return "because a flush waits on it"
    if detail.get("closing"):
        return "because its flowgraph was closing"
    return "on its periodic update"


def _segment_path(window, gate, count, t0, path, causes):
    """The segment that became Flushing or Flushed last: its SaveBinlogPaths, the sync task that wrote it and the
    request that sealed it."""
    segment = int(gate["segment"])
    state = detail_dict(gate["detail"]).get("state")
    path.append((gate, f"the last of the flush's {count} conditions to hold: segment {segment} became {state} here "
                       f"(SaveBinlogPaths recorded its last sync)"))
    before = window[window["seq"] <= int(gate["seq"])]
    syncs = before[(before["kind"] == "datanode.sync") & (before["segment"] == segment)]
    syncs = syncs[[detail_dict(d).get("flush") is True for d in syncs["detail"]]]
    if len(syncs):
        sync = syncs.iloc[-1]
        path.append((sync, f"the DataNode cut segment {segment}'s last sync here (its write buffer's flush of the "
                           f"sealed segment)"))
        _sync_cost(window, sync, causes, cut=sync)
        asked = before[(before["kind"] == "datacoord.flush_segments") & (before["seq"] < int(sync["seq"]))]
        asked = asked[[segment in (detail_dict(d).get("segments") or ()) for d in asked["detail"]]]
        if len(asked):
            a = asked.iloc[-1]
            path.append((a, f"DataCoord asked {a['peer']} to flush sealed segment {segment} here, on that DataNode's "
                            f"time tick (handleDataNodeTtMsg)"))
            causes.append((TICK_WAIT, float(a["t_ms"]) - t0, a,
                           f"the flush waited for DataCoord to let sealed segment {segment} go: on each of a "
                           f"DataNode's time ticks (dataNode.timetick.interval, 500 ms by default) DataCoord asks it "
                           f"to flush only the sealed segments whose last row allocation has expired by the tick's "
                           f"timestamp (dataCoord.segment.assignmentExpiration, 2 s after it was granted: until then "
                           f"an insert granted rows in it may still arrive) and whose rows are counted "
                           f"(flushPolicyL1); the tick that let it go carried {ts_text(int(a['ts']))} and came here, "
                           f"{float(a['t_ms']) - t0:,.0f} ms into the flush"))


def _sync_cost(window, row, causes, cut=None):
    """The causes a sync task adds: slow object store writes (from the cut to its first SaveBinlogPaths) and
    failed SaveBinlogPaths calls it retried."""
    segment, vchannel = int(row["segment"]), str(row["vchannel"])
    if cut is None:
        cuts = window[(window["kind"] == "datanode.sync") & (window["segment"] == segment)
                      & (window["seq"] < int(row["seq"]))]
        if not len(cuts):
            return
        cut = cuts.iloc[-1]
    saves = window[(window["kind"] == "datacoord.save_binlog_paths") & (window["segment"] == segment)
                   & (window["vchannel"] == vchannel) & (window["seq"] > int(cut["seq"]))]
    if not len(saves):
        return
    first = saves.iloc[0]
    write_ms = float(first["t_ms"]) - float(cut["t_ms"])
    if write_ms > SLOW_WRITE_MS:
        causes.append((SLOW_STORE, write_ms, cut,
                       f"the sync task of segment {segment} spent {write_ms:,.0f} ms writing its binlogs to the object "
                       f"store (from the cut at {_s(cut)} to its SaveBinlogPaths at {_s(first)}): the object store "
                       f"is slow"))
    failed = saves[saves["error"].notna()]
    ok = saves[saves["error"].isna()]
    if len(failed) and len(ok):
        f, o = failed.iloc[0], ok.iloc[0]
        causes.append((FAILED_RPC, float(o["t_ms"]) - float(f["t_ms"]), f,
                       f"SaveBinlogPaths for segment {segment} failed here ({f['error']}); the sync task retries it "
                       f"with back-off, {len(failed):,} failed call{'s' if len(failed) > 1 else ''} until it was "
                       f"recorded at {_s(o)}"))


def _crash_causes(events, begin_seq, end_seq, t0, causes):
    """A DataNode killed before the flush finished whose channels were consumed again only after the flush began:
    everything in its memory was lost, and the flush waited for the channel's next owner (the node restarted, or
    another once its session expired) to seek to the checkpoint and replay."""
    kills = events[(events["kind"] == "fault.kill") & events["node"].astype(str).str.startswith("datanode")
                   & (events["seq"] < end_seq)]
    for _, kill in kills.iterrows():
        after = events[(events["seq"] > int(kill["seq"])) & (events["seq"] < end_seq)]
        watches = after[after["kind"] == "datanode.watch"]
        back = watches.iloc[0] if len(watches) else None
        if back is not None and int(back["seq"]) < begin_seq:
            continue
        end_ms = float(back["t_ms"]) if back is not None else float(after["t_ms"].iloc[-1])
        restarts = after[(after["kind"] == "fault.restart") & (after["node"] == kill["node"])]
        reassigned = after[after["kind"] == "datacoord.reassign"]
        how = ""
        if len(restarts) and (back is None or int(restarts.iloc[0]["seq"]) < int(back["seq"])):
            how = f", restarted at {_s(restarts.iloc[0])}"
        if len(reassigned) and (back is None or int(reassigned.iloc[0]["seq"]) < int(back["seq"])):
            r = reassigned.iloc[0]
            how += (f"; DataCoord handed its channels to {r['peer']} only at {_s(r)} (event {int(r['seq']) + 1:,}), "
                    f"when its session expired")
        if back is not None:
            # replay starts at the stored checkpoint: what was lost below it (a checkpoint that passed a sync still
            # running) is not read again, so "replaying what was lost" would claim a recovery that may not happen
            how += (f"; {back['node']} watched {back['vchannel']} again at {_s(back)} from its channel checkpoint "
                    f"{ts_text(int(back['ts']))} (event {int(back['seq']) + 1:,}), replaying the channel from there")
        when = (f"{float(kill['t_ms']) - t0:,.0f} ms into the flush" if float(kill["t_ms"]) >= t0
                else f"{t0 - float(kill['t_ms']):,.0f} ms before the flush began")
        causes.append((CRASH, end_ms - float(kill["t_ms"]), kill,
                       f"{kill['node']} crashed here, {when}: its buffers, syncs in flight and checkpoint tasks were "
                       f"lost{how}; its channels went unconsumed for {end_ms - float(kill['t_ms']):,.0f} ms"))


def explain_flush_never_completed(events: pd.DataFrame, subject) -> Answer:
    """Answer "why did the checker report a flush that never completed?" (``flush-completes``): the flush is the
    client flush among the violation's events, asked about as ``flush-wait``."""
    seqs = {int(s) for s in subject["seqs"]}
    starts = flush_starts(events)
    numbers = [n for n, seq in enumerate(starts["seq"], 1) if int(seq) in seqs]
    if not numbers:
        raise WhyError("the violation names no client flush of this run")
    return Answer((), Question("flush-wait", {"number": numbers[0]}))


EXPLAINERS = {"flush-wait": explain_flush,
              VIOLATION_QUESTION.format(invariant="flush-completes"): explain_flush_never_completed}
