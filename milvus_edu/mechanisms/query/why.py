"""Why did a read wait? The query lesson's part of the causal chain (:mod:`milvus_edu.explain`).

A read waits on a shard delegator while its guarantee timestamp is above the delegator's tsafe
(``shardDelegator.waitTSafe``). Two things make that wait long: tsafe stood still (its vchannel's pchannel got no
time tick: a question for the TimeTick lesson, asked as ``tick-stopped``), or the guarantee lay in the future (a
Bounded read's begin timestamp comes from the proxy's own clock, so a clock that runs ahead asks for data not yet
written). A read that failed because its delegator was released ends at the release. A read that did not wait but
read at a tsafe whose ticks had stopped read stale data, and is explained by the same stopped ticks. Every clause is
read off the run log.
"""

from __future__ import annotations

import math

import pandas as pd

from ...events.schema import SIM_EPOCH_MS
from ...explain import Answer, Link, Question, WhyError
from ...narrate import detail_dict, times, ts_text
from ...querynode import TS_LAG_TOO_LARGE
from ...tsoutil import parse_hybrid_ts, physical_time
from .narrate import CLIENT_GUARANTEE_LEVELS

#: A guarantee at most this far ahead of the true time is an ordinary wait for the next time tick
#: (proxy.timeTickInterval, 200 ms by default), not a guarantee in the future.
ORDINARY_AHEAD_MS = 200.0
#: tsafe standing still longer than this many of its pchannel's usual tick intervals means the ticks stopped (the
#: progress bound the query and TimeTick checkers use too).
PROGRESS_INTERVALS = 5


def _reads(events: pd.DataFrame) -> list[int]:
    """Every read's request number, in order."""
    starts = events[events["kind"] == "client.read_start"]["request"].dropna()
    return sorted({int(r) for r in starts})


def waited_reads(events: pd.DataFrame) -> list[int]:
    """The reads that waited on some delegator (a ``querynode.wait``), in order: named when ``why`` refuses a read."""
    waits = events[events["kind"] == "querynode.wait"]["request"].dropna()
    return sorted({int(r) for r in waits})


def _listing(numbers: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(n) for n in numbers[:limit])
    return shown + (f" and {len(numbers) - limit} more" if len(numbers) > limit else "")


def _shard(events: pd.DataFrame, request: int, vchannel: str | None = None):
    """The shard the read waited longest on (on ``vchannel``, when the read waited there: the shard a violation
    names): its ``querynode.wait`` row and its ``querynode.read`` row (``None`` when the run ended while it waited)."""
    mine = events[events["request"] == request]
    waits = mine[mine["kind"] == "querynode.wait"]
    if vchannel is not None and (waits["vchannel"] == vchannel).any():
        waits = waits[waits["vchannel"] == vchannel]
    done = mine[mine["kind"] == "querynode.read"]
    best = None
    for _, wait in waits.iterrows():
        after = done[(done["vchannel"] == wait["vchannel"]) & (done["seq"] > wait["seq"])]
        end = after.iloc[0] if len(after) else None
        waited = (float(detail_dict(end["detail"]).get("waited_ms") or 0.0) if end is not None
                  else float(events["t_ms"].iloc[-1]) - float(wait["t_ms"]))
        if best is None or waited > best[2]:
            best = (wait, end, waited)
    return best


def _explain_refused(events: pd.DataFrame, request: int) -> Answer | None:
    """A read a delegator refused at once because its guarantee lay more than ``maxTimestampLag`` past tsafe
    (``shardDelegator.waitTSafe``): the refusal, and where the guarantee came from. ``None`` for any other read."""
    mine = events[events["request"] == request]
    refusals = mine[(mine["kind"] == "querynode.read") & mine["error"].fillna("").str.startswith(TS_LAG_TOO_LARGE)]
    if not len(refusals):
        return None
    row = refusals.iloc[0]
    guarantee, tsafe = int(row["guarantee_ts"]), int(row["tick_ts"])
    lag_ms = parse_hybrid_ts(guarantee)[0] - parse_hybrid_ts(tsafe)[0]
    level = str(row["level"]) if pd.notna(row["level"]) else "default-level"
    links = [Link.of(row, f"read {request} ({_what(events, request, level)}) was refused at once by {row['node']} on "
                          f"vchannel {row['vchannel']}: its guarantee {ts_text(guarantee)} lay {lag_ms / 3_600_000:,.1f} h "
                          f"past tsafe {ts_text(tsafe)}, more than queryNode.scheduler.maxTimestampLag allows, so the "
                          f"delegator answers {TS_LAG_TOO_LARGE!r} instead of waiting (shardDelegator.waitTSafe)")]
    start = mine[mine["kind"] == "client.read_start"]
    if level in CLIENT_GUARANTEE_LEVELS and len(start):
        links.append(Link.of(start.iloc[0], f"the client sent that guarantee itself: at {level} the proxy keeps the "
                                            f"client's guarantee timestamp (parseGuaranteeTsFromConsistency)"))
    return Answer(tuple(links), title=f"Why was read {request} refused?")


def explain_read(events: pd.DataFrame, subject) -> Answer:
    """Answer "why did read ``subject['request']`` wait?": the read, the tsafe it waited for, and why tsafe did not
    reach the guarantee sooner (ticks that stopped, as a follow-up question, or a guarantee in the future). A read
    that did not wait but read stale data (at a tsafe whose ticks had stopped) is explained by the stopped ticks, one
    a delegator refused at once (its guarantee too far past tsafe) by the refusal and where the guarantee came from.
    ``WhyError`` for a read not in the run, or one that neither waited, nor was stale, nor was refused so.
    ``subject['vchannel']``, when given, is the shard to explain if the read waited there (a violation's shard)."""
    request = int(subject["request"])
    reads = _reads(events)
    if request not in reads:
        have = f"its reads are numbered {reads[0]} to {reads[-1]}" if reads else "it holds no reads"
        raise WhyError(f"there is no read {request} in this run: {have} (`milvus-edu timeline RUN --all` lists them)")
    shard = _shard(events, request, subject.get("vchannel"))
    if shard is None:
        refused = _explain_refused(events, request)
        if refused is not None:
            return refused
        stale = _explain_stale(events, request)
        if stale is not None:
            return stale
        waited = waited_reads(events)
        where = (f"reads that waited in this run: {_listing(waited)}" if waited else "no read in this run waited")
        mine = events[(events["request"] == request) & (events["kind"] == "querynode.read")]
        refused = mine[mine["error"].notna()]
        answered = events[(events["request"] == request) & (events["kind"] == "client.read")]
        failed = answered[answered["error"].notna()]
        # a read a shard refused at once for another reason than a guarantee too far ahead (that one was explained
        # above), or one that never reached a shard (the proxy failed it: collection not found), got no shard's
        # answer: "every shard answered" would be false
        if len(refused):
            how = f"a shard refused it at once ({refused['error'].iloc[0]})"
        elif not len(mine):
            how = (f"it never reached a shard (it failed with {failed['error'].iloc[0]})" if len(failed) else
                   "it reached no shard before the run ended")
        else:
            how = "every shard answered at once from a tsafe its time ticks kept moving"
        raise WhyError(f"read {request} neither waited nor read stale data: {how}; `why` explains reads that waited, "
                       f"timed out, were stale or were refused for a guarantee too far ahead ({where})")
    wait, end, waited_ms = shard
    mine = events[events["request"] == request]
    proxy = mine[mine["kind"] == "proxy.read"]
    proxy = proxy.iloc[0] if len(proxy) else None
    level = str(wait["level"]) if pd.notna(wait["level"]) else "default-level"
    what = _what(events, request, level)
    vchannel, node, guarantee = str(wait["vchannel"]), str(wait["node"]), int(wait["guarantee_ts"])
    tsafe = int(wait["tick_ts"])

    if end is None:
        outcome = f"was still waiting on {node} for vchannel {vchannel} when the run ended, {waited_ms:,.0f} ms later"
        first = Link.of(events.iloc[-1], f"read {request} ({what}) {outcome}")
    else:
        failed = f" and failed with {end['error']}" if pd.notna(end["error"]) else ""
        first = Link.of(end, f"read {request} ({what}) waited {waited_ms:,.0f} ms on {node} for vchannel "
                             f"{vchannel}{failed}")
    links = [first, Link.of(wait, f"its guarantee {ts_text(guarantee)} was above the tsafe of {vchannel} on {node}, "
                                  f"{ts_text(tsafe)}: a delegator serves a read only once tsafe reaches its guarantee")]

    stop = int(end["seq"]) if end is not None else int(events["seq"].iloc[-1]) + 1
    moved = events[(events["kind"] == "querynode.tsafe") & (events["vchannel"] == vchannel)
                   & (events["seq"] > int(wait["seq"])) & (events["seq"] < stop)]
    pchannel = _pchannel(events, vchannel)
    ticks, every = _ticks(events, pchannel)
    released = events[(events["kind"] == "querynode.release") & (events["vchannel"] == vchannel)
                      & (events["seq"] > int(wait["seq"])) & (events["seq"] < stop)]
    if len(released):
        collection = detail_dict(released.iloc[0]["detail"]).get("collection_id")
        links.append(Link.of(released.iloc[0], f"the QueryNode released {vchannel} while the read waited (collection "
                                               f"{collection} was dropped): a read waiting on a delegator fails when "
                                               f"the delegator closes"))
        return Answer(tuple(links))
    end_ms = float(end["t_ms"]) if end is not None else float(events["t_ms"].iloc[-1])
    still = _longest_still(ticks, [tsafe] + [int(v) for v in moved["ts"]], float(wait["t_ms"]), end_ms)
    if still is not None and still[2] > PROGRESS_INTERVALS * every:
        tick, nxt, _ = still
        since = max(float(wait["t_ms"]), float(tick["t_ms"]))
        upto = min(float(nxt["t_ms"]), end_ms) if nxt is not None else end_ms
        until = (f"the next came only at {nxt['t_ms'] / 1000:.3f} s (event {int(nxt['seq']) + 1:,})"
                 if nxt is not None else "no other came before the run ended")
        links.append(Link.of(tick, f"tsafe of {vchannel} stood still at {ts_text(int(tick['tick_ts']))} from "
                                   f"{since / 1000:.3f} s to {upto / 1000:.3f} s of the wait: it follows the time tick "
                                   f"of pchannel {pchannel}, whose tick {ts_text(int(tick['tick_ts']))} was written here "
                                   f"(its ticks usually came {every:,.0f} ms apart), and {until}"))
        follow = Question("tick-stopped", {"pchannel": pchannel, "after_seq": int(tick["seq"]),
                                           "until_seq": int(nxt["seq"]) if nxt is not None else None})
        return Answer(tuple(links), follow)
    moves = times(len(moved))
    ahead = _ahead(proxy, guarantee)
    if ahead is not None and ahead[0] > ORDINARY_AHEAD_MS:
        passed = moved[moved["ts"] >= guarantee]
        if len(passed):
            links.append(Link.of(passed.iloc[0], f"tsafe of {vchannel} moved {moves} during the wait, as time ticks "
                                                 f"came about every {every:,.0f} ms, and reached the guarantee only "
                                                 f"here"))
        links.append(Link.of(proxy, ahead[1]))
        return Answer(tuple(links))
    if not len(moved):
        links.append(Link.of(wait, f"tsafe of {vchannel} did not move during the {end_ms - float(wait['t_ms']):,.0f} ms "
                                   f"wait (ticks on {pchannel} usually come {every:,.0f} ms apart)"))
        return Answer(tuple(links))
    last = moved.iloc[-1]
    if int(last["ts"]) >= guarantee:
        links.append(Link.of(last, f"tsafe of {vchannel} follows the time tick of pchannel {pchannel}, written about "
                                   f"every {every:,.0f} ms: it moved {moves} during the wait and reached the guarantee "
                                   f"here, an ordinary wait for the next tick"))
    else:
        links.append(Link.of(last, f"tsafe of {vchannel} moved {moves} during the wait but stayed below the guarantee, "
                                   f"last at {ts_text(int(last['ts']))}: it follows the time tick of pchannel "
                                   f"{pchannel}, which lagged behind the guarantee"))
    return Answer(tuple(links))


def _ticks(events: pd.DataFrame, pchannel: str) -> tuple[pd.DataFrame, float]:
    """The TimeTicks written to ``pchannel`` and their usual spacing in ms (the median; NaN with fewer than two)."""
    ticks = events[(events["kind"] == "mq.produce") & (events["msg_type"] == "TimeTick")
                   & (events["channel"] == pchannel)]
    return ticks, (float(ticks["t_ms"].diff().median()) if len(ticks) > 1 else float("nan"))


def _explain_stale(events: pd.DataFrame, request: int) -> Answer | None:
    """A read that did not wait but read at a tsafe that had stood still for longer than the progress bound: the
    read, how old its data was, and the stopped tick (a follow-up question); ``None`` for a read with fresh data."""
    shards = events[(events["request"] == request) & (events["kind"] == "querynode.read") & events["error"].isna()
                    & events["ts"].notna()]
    worst = None
    for _, row in shards.iterrows():
        pchannel = _pchannel(events, str(row["vchannel"]))
        ticks, every = _ticks(events, pchannel)
        still = _longest_still(ticks, [int(row["ts"])], float("-inf"), float(row["t_ms"]))
        if still is None or not still[2] > PROGRESS_INTERVALS * every:
            continue
        if worst is None or still[2] > worst[1][2]:
            worst = (row, still, pchannel, every)
    if worst is None:
        return None
    row, (tick, nxt, stood), pchannel, every = worst
    vchannel, tsafe = str(row["vchannel"]), int(row["ts"])
    behind = SIM_EPOCH_MS + float(row["t_ms"]) - parse_hybrid_ts(tsafe)[0]
    level = str(row["level"]) if pd.notna(row["level"]) else "default-level"
    until = (f"the next came only at {nxt['t_ms'] / 1000:.3f} s (event {int(nxt['seq']) + 1:,})"
             if nxt is not None else "no other came before the run ended")
    links = (Link.of(row, f"read {request} ({_what(events, request, level)}) did not wait on {row['node']} for vchannel {vchannel} but read at "
                          f"tsafe {ts_text(tsafe)}, {behind:,.0f} ms behind the true time: it saw no write made after "
                          f"that"),
             Link.of(tick, f"tsafe of {vchannel} stood still at {ts_text(int(tick['tick_ts']))} for {stood:,.0f} ms "
                           f"before the read: it follows the time tick of pchannel {pchannel}, whose tick was written "
                           f"here (its ticks usually came {every:,.0f} ms apart), and {until}"))
    follow = Question("tick-stopped", {"pchannel": pchannel, "after_seq": int(tick["seq"]),
                                       "until_seq": int(nxt["seq"]) if nxt is not None else None})
    return Answer(links, follow, title=f"Why did read {request} read stale data?")


def _what(events: pd.DataFrame, request: int, level: str) -> str:
    """``Strong search through proxy-1``: a read's level, operation and proxy, from its ``proxy.read``."""
    proxy = events[(events["request"] == request) & (events["kind"] == "proxy.read")]
    if not len(proxy):
        return level
    return f"{level} {detail_dict(proxy.iloc[0]['detail']).get('op') or 'read'} through {proxy.iloc[0]['node']}"


def _longest_still(ticks: pd.DataFrame, values: list[int], wait_ms: float, end_ms: float):
    """Of the tsafe values a read saw while it waited, the one that stood still longest: the TimeTick that carried it,
    the next TimeTick past it (``None``: none before the run ended) and how long, within the wait, it stood;
    ``None`` when no TimeTick carried any of them."""
    best = None
    for value in dict.fromkeys(values):
        carried = ticks[ticks["tick_ts"] <= value]
        if not len(carried):
            continue
        later = ticks[ticks["tick_ts"] > value]
        tick, nxt = carried.iloc[-1], (later.iloc[0] if len(later) else None)
        stood = (min(float(nxt["t_ms"]), end_ms) if nxt is not None else end_ms) - max(wait_ms, float(tick["t_ms"]))
        if best is None or stood > best[2]:
            best = (tick, nxt, stood)
    return best


def _pchannel(events: pd.DataFrame, vchannel: str) -> str:
    """The pchannel a vchannel lives on, from the QueryNode's watch of it."""
    watch = events[(events["kind"] == "querynode.watch") & (events["vchannel"] == vchannel)]
    return str(watch["channel"].iloc[0]) if len(watch) else vchannel.rsplit("_", 1)[0]


def _ahead(proxy, guarantee: int):
    """How far the guarantee lay in the future when the proxy set it (ms, true time), with the clause saying where
    it came from; ``None`` without a proxy event or a guarantee with no time in it."""
    if proxy is None or physical_time(guarantee) == 0:
        return None
    detail = detail_dict(proxy["detail"])
    # in whole ms, as the node clock and the guarantee's physical part are read: a fraction of the true time
    # would otherwise turn a 9,000 ms offset into 8,999
    true_ms = SIM_EPOCH_MS + math.floor(float(proxy["t_ms"]))
    physical, _ = parse_hybrid_ts(guarantee)
    ahead = physical - true_ms
    name = str(proxy["node"])
    if str(proxy["level"]) in CLIENT_GUARANTEE_LEVELS:
        text = (f"the client asked for guarantee {ts_text(guarantee)}, {ahead:,.0f} ms in the future of the true time "
                f"({float(proxy['t_ms']) / 1000:.3f} s) when {name} took the read: at level {proxy['level']} the "
                f"proxy keeps the guarantee the client sends")
    elif detail.get("from_tso") is False and pd.notna(proxy["clock_ms"]):
        offset = float(proxy["clock_ms"]) - true_ms
        grace = detail.get("graceful_time_ms")
        minus = f" minus the graceful time ({grace:,} ms)" if grace is not None else ""
        direction = "ahead" if offset > 0 else "behind"
        text = (f"{name} set the guarantee {ahead:,.0f} ms in the future: a {proxy['level']} read's guarantee is the "
                f"proxy's begin timestamp{minus}, and {name} took the begin timestamp from its own clock, not the TSO; "
                f"that clock read {(float(proxy['clock_ms']) - SIM_EPOCH_MS) / 1000:.3f} s when the true time was "
                f"{float(proxy['t_ms']) / 1000:.3f} s: {name}'s clock runs {abs(offset):,.0f} ms {direction}")
    else:
        text = (f"the guarantee {ts_text(guarantee)} that {name} applied lay {ahead:,.0f} ms in the future of the "
                f"true time ({float(proxy['t_ms']) / 1000:.3f} s) when the read arrived")
    return ahead, text


EXPLAINERS = {"read": explain_read}


def ask_read(events: pd.DataFrame, i: int) -> dict | None:
    """The question an event of a read poses (the explorer's Why?): why did read ``request`` wait."""
    request = events["request"].iloc[i]
    return None if pd.isna(request) else {"read": int(request)}


#: Every kind of a read's events (those that carry its ``request``) asks about that read.
ASKS = dict.fromkeys(("client.read_start", "client.read", "proxy.read", "querynode.wait", "querynode.read"), ask_read)
