"""Self-checks for ``notebooks/07_incidents.ipynb``, the incident lab (see :mod:`milvus_edu.labs.feedback`).

Why here and not in a lesson's ``labs.py``: the lab follows four Milvus issues across lessons — a read's guarantee
and the delegator's tsafe (the query lesson), the time ticks that move tsafe and the proxy sessions rootcoord waits
for (the timetick lesson), the session leases behind them (the tso lesson's sessions) — and a lesson may not import
another. So its checks live in the shared ``labs`` package, beside the checks every lab shares, and obey the plug-in
contract (``tests/test_plugin_contract.py``): they read run logs only (event kinds and columns), name scenarios but
no lesson, and import nothing from ``milvus_edu.mechanisms``.

Every check judges the answer against a run — the notebook's, or one it makes itself with the same rules — never
against a number written into this file, so it stays right for any seed or option.
"""

from __future__ import annotations

import functools
import math

import pandas as pd

from ..config import QueryParams
from ..events import SIM_EPOCH_MS
from ..narrate import detail_dict, ts_text
from ..querynode import TS_LAG_TOO_LARGE
from ..registry import get_scenario
from ..tsoutil import LOGICAL_BITS_MASK, compose_ts, physical_time
from .feedback import Feedback, judge_integer, right, wrong

#: The largest logical part of a hybrid timestamp (18 bits: tsoutil's mask).
MAX_LOGICAL = LOGICAL_BITS_MASK


def _rows(events: pd.DataFrame, kind: str) -> pd.DataFrame:
    return events[events["kind"] == kind]


def _read_row(events: pd.DataFrame, request: int) -> dict:
    """The ``client.read`` row of read ``request`` (``ValueError`` when the run has none)."""
    rows = _rows(events, "client.read")
    mine = rows[rows["request"].astype("Int64") == request]
    if mine.empty:
        raise ValueError(f"the run has no answered or failed read #{request}")
    return mine.iloc[0].to_dict()


# ---- Incident 1: Milvus issue #35090 ------------------------------------------------------------
def missed_insert(events: pd.DataFrame, request: int) -> dict:
    """The write read ``request`` missed: the same client's last insert acknowledged before the read began, with the
    read's own row (``{"insert": row, "read": row}``)."""
    read = _read_row(events, request)
    starts = _rows(events, "client.read_start")
    start = starts[starts["request"].astype("Int64") == request]
    began = int(start["seq"].iloc[0]) if len(start) else int(read["seq"])
    inserts = _rows(events, "client.insert")
    before = inserts[(inserts["node"] == read["node"]) & inserts["error"].isna() & (inserts["seq"] < began)]
    if before.empty:
        raise ValueError(f"read #{request}'s client inserted nothing before the read began")
    return {"insert": before.iloc[-1].to_dict(), "read": read}


def check_tick_behind_insert(answer, events: pd.DataFrame, request: int) -> Feedback:
    """Exercise (#35090): by how many milliseconds (physical parts) the timestamp read ``request`` read at was below
    the timestamp of the insert its client made just before (an int; positive when the read was behind)."""
    found = missed_insert(events, request)
    insert_ts, read_ts = int(found["insert"]["ts"]), int(found["read"]["ts"])
    guarantee = int(found["read"]["guarantee_ts"])
    want = physical_time(insert_ts) - physical_time(read_ts)

    def judge(value: int) -> Feedback:
        if value == want:
            return right(f"Right: the insert was stamped {ts_text(insert_ts)}, and read #{request} read at "
                         f"{ts_text(read_ts)}, {want:,} ms earlier. A Bounded read does not wait (its guarantee, "
                         f"{ts_text(guarantee)}, was already below tsafe), so it reads at the tsafe it finds: the last "
                         f"time tick the shard applied, stamped before the insert. The row is not missing; the read "
                         f"looked at the collection as it was {want:,} ms before the write.")
        if value == -want:
            return wrong("The size is right, the sign is not: the read timestamp is *below* the insert's, so insert "
                         "minus read is positive.")
        if value == insert_ts - read_ts:
            return wrong("That is the difference of the hybrid timestamps: the low 18 bits are the logical counter. "
                         "Take the physical parts first (`ts >> 18`), then subtract: milliseconds.")
        if value in (physical_time(insert_ts) - physical_time(guarantee), physical_time(read_ts) - physical_time(guarantee)):
            return wrong("That uses the read's guarantee, which is where the proxy *asked* to read from (its clock "
                         "minus 5 s). The read ran at the tsafe the shard had: the `ts` of the client.read row.")
        return wrong(f"{value:,} ms is not it. Take the insert's `ts` (the client.insert row of the same client just "
                     f"before the read) and the read's `ts` (its client.read row), shift both right by 18 bits "
                     f"(the physical part, in ms) and subtract.")

    return judge_integer(answer, "an int: milliseconds", judge, timestamp=False)


# ---- Incident 2: Milvus issue #16841 ------------------------------------------------------------
def bounded_future_ms(events: pd.DataFrame, proxy: str) -> list[int]:
    """For each Bounded read ``proxy`` took, how far (ms) its guarantee's physical part was ahead of the true time at
    which the proxy took it (negative: behind), to the millisecond: a clock is read in whole milliseconds, so the true
    time is taken in whole milliseconds too (rounded down)."""
    rows = _rows(events, "proxy.read")
    rows = rows[(rows["node"] == proxy) & (rows["level"] == "Bounded") & rows["guarantee_ts"].notna()]
    return [physical_time(int(g)) - (SIM_EPOCH_MS + math.floor(t)) for g, t in zip(rows["guarantee_ts"], rows["t_ms"])]


@functools.lru_cache(maxsize=8)
def skewed_guarantee(ahead_ms: float, seed: int = 1) -> tuple[int, int, tuple[float, ...]]:
    """``(how far ahead, graceful time, proxy-2's reads' waits)`` in a run of ``clock-skew-bounded`` with proxy-2's
    clock ``ahead_ms`` ahead, all in ms: the facts :func:`check_future_guarantee` judges on, one run per skew and seed
    (a notebook cell run again, or a second answer, reuses it)."""
    from ..sim.run import simulate

    run = simulate("clock-skew-bounded", seed=seed, duration_s=8, options={"ahead_ms": float(ahead_ms), "reads": 3})
    ev = run.events
    ahead = sorted(set(bounded_future_ms(ev, "proxy-2")))
    if len(ahead) != 1:
        raise ValueError(f"expected one distance for proxy-2's Bounded reads, the run gave {ahead}")
    graceful = int(detail_dict(_rows(ev, "proxy.read")["detail"].iloc[0]).get("graceful_time_ms",
                                                                              QueryParams().graceful_time_ms))
    proxy_2 = set(_rows(ev, "proxy.read").pipe(lambda r: r[r["node"] == "proxy-2"])["request"])
    shards = _rows(ev, "querynode.read").pipe(lambda r: r[r["request"].isin(proxy_2) & r["error"].isna()])
    return ahead[0], graceful, tuple(float(detail_dict(d).get("waited_ms") or 0.0) for d in shards["detail"])


def check_future_guarantee(answer, ahead_ms: float, seed: int = 1) -> Feedback:
    """Exercise (#16841): with proxy-2's clock ``ahead_ms`` ahead, how far in the future of the true time (ms) is the
    guarantee of a Bounded read through proxy-2? Judged on a run of ``clock-skew-bounded`` with that skew."""
    want, graceful, waits = skewed_guarantee(float(ahead_ms), seed)

    def judge(value: int) -> Feedback:
        if value == want:
            shown = f"; in the run its reads waited {min(waits):,.0f} to {max(waits):,.0f} ms" if waits else ""
            return right(f"Right: proxy-2 reads its own clock, {ahead_ms:,.0f} ms ahead, and subtracts "
                         f"common.gracefulTime ({graceful:,} ms): the guarantee is {want:,} ms in the future. tsafe "
                         f"follows the time ticks, which follow the TSO's true time, so each read waits about that "
                         f"long{shown}.")
        if value == int(ahead_ms):
            return wrong(f"{value:,} ms is the clock's lead alone. A Bounded guarantee is the proxy's clock *minus* "
                         f"common.gracefulTime ({graceful:,} ms).")
        if value == int(ahead_ms) + graceful:
            return wrong("Bounded subtracts the graceful time from the clock; it does not add it.")
        if value == -want:
            return wrong("The size is right, the sign is not: the clock is ahead, so the guarantee lies in the future "
                         "(positive).")
        shown_ahead = float(get_scenario("clock-skew-bounded").options["ahead_ms"])
        if ahead_ms != shown_ahead and value == round(shown_ahead) - graceful:
            return wrong(f"{value:,} ms is what the run above shows, with proxy-2 {shown_ahead:,.0f} ms ahead; this "
                         f"question moves its clock {ahead_ms:,.0f} ms ahead. Work it out the same way.")
        return wrong(f"{value:,} ms is not it. The guarantee is proxy-2's clock reading minus {graceful:,} ms; its clock "
                     f"reads the true time plus {ahead_ms:,.0f} ms.")

    return judge_integer(answer, "an int: milliseconds", judge, timestamp=False)


def clock_behind_steps(reads: int = 10) -> list[dict]:
    """The workload of the lab's "clock behind" run: Client1 inserts a key every second and, half a second later,
    reads at Bounded together with Client2. Clients take the proxies in turn, so Client1 reads through proxy-1 and
    Client2 through proxy-2 (the run puts proxy-2's clock behind and pauses a third proxy to stop the ticks)."""
    steps = [{"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "C0"}]
    for i in range(reads):
        steps += [
            {"at": 1.0 + i, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": f"K{i}"}]},
            {"at": 1.5 + i, "client": "Client1", "op": "search", "collection": "C0", "consistency_level": "Bounded"},
            {"at": 1.5 + i, "client": "Client2", "op": "search", "collection": "C0", "consistency_level": "Bounded"},
        ]
    return steps


# ---- Incident 3: Milvus issue #34392 ------------------------------------------------------------
def blocking_session(events: pd.DataFrame) -> dict:
    """The session that held the time ticks back: the killed proxy's (``node``, ``server_id``) and, when it
    restarted, its new server id (``restarted_as``)."""
    kills = _rows(events, "fault.kill")
    if kills.empty:
        raise ValueError("the run has no fault.kill event: run tsafe-stall-proxy-restart")
    kill = kills.iloc[0]
    restarts = _rows(events, "fault.restart")
    restarts = restarts[(restarts["node"] == kill["node"]) & (restarts["seq"] > kill["seq"])]
    return {"node": kill["node"], "server_id": int(detail_dict(kill["detail"])["server_id"]),
            "restarted_as": int(detail_dict(restarts["detail"].iloc[0])["server_id"]) if len(restarts) else None}


def check_blocking_session(answer, events: pd.DataFrame) -> Feedback:
    """Exercise (#34392): the server id of the proxy session rootcoord waited for while no time tick went out."""
    s = blocking_session(events)
    if isinstance(answer, str) and answer.strip().lower() == str(s["node"]).lower():
        return wrong(f"{s['node']} is the proxy's name, and it had two sessions in this run: give the server id (an "
                     "int) of the one rootcoord waited for.")

    def judge(value: int) -> Feedback:
        if value == s["server_id"]:
            return right(f"Right: {s['server_id']}, the session of {s['node']} before it was killed. A crash revokes "
                         f"nothing, so that session stays registered in etcd until its lease runs out, and rootcoord "
                         f"sends a round of time ticks only once every registered session has reported: the dead one "
                         f"never does. The restarted proxy, a new session"
                         + (f" ({s['restarted_as']})" if s["restarted_as"] is not None else "")
                         + ", reported as usual, and could not help.")
        if value == s["restarted_as"]:
            return wrong(f"{value} is the restarted {s['node']}'s new session: it reports every interval. Rootcoord was "
                         f"waiting for a session that would never report again.")
        return wrong(f"{value} is not a session of the killed proxy. The fault.kill row names its server id in "
                     f"`detail`; `milvus_edu.why` names it too.")

    return judge_integer(answer, "an int: a server id", judge, timestamp=False)


# ---- Incident 4: Milvus issue #36960 ------------------------------------------------------------
def refused_read(events: pd.DataFrame) -> dict:
    """The first shard read refused with "Timestamp lag too large" (its querynode.read row)."""
    rows = _rows(events, "querynode.read")
    refused = rows[rows["error"].fillna("").str.startswith(TS_LAG_TOO_LARGE)]
    if refused.empty:
        raise ValueError(f"the run has no read refused with {TS_LAG_TOO_LARGE!r}: run lag-too-large")
    return refused.iloc[0].to_dict()


def check_largest_waited_guarantee(answer, events: pd.DataFrame,
                                   max_lag_ns: int = QueryParams().max_timestamp_lag_ns) -> Feedback:
    """Exercise (#36960): the largest guarantee (a hybrid timestamp) that the delegator of the refused read, at the
    tsafe it had then, would still wait for instead of refusing; ``max_lag_ns`` is maxTimestampLag."""
    tsafe = int(refused_read(events)["tick_ts"])
    max_ms = max_lag_ns // 1_000_000
    limit = physical_time(tsafe) + max_ms
    want = compose_ts(limit, MAX_LOGICAL)

    def judge(value: int) -> Feedback:
        if value == want:
            return right(f"Right: {ts_text(want)}. waitTSafe compares physical parts only: the lag is "
                         f"{max_ms:,} ms, not more than maxTimestampLag, so it waits; any logical part passes, so the "
                         f"largest is {MAX_LOGICAL:,}. One millisecond more and it is refused at once, whatever the "
                         f"logical part.")
        if value < compose_ts(physical_time(tsafe) // 2, 0):
            return wrong("That is too small to be a hybrid timestamp of this run (a time in ms, perhaps): shift the "
                         "physical part (ms) left by 18 bits and add the logical part: `(physical << 18) + logical`.")
        if value == tsafe + max_ms:
            return wrong(f"That adds {max_ms:,} to the hybrid timestamp itself, whose low 18 bits count logical "
                         f"ticks, not milliseconds: it lands at {ts_text(value)}, a fraction of a second past tsafe. "
                         "Add the milliseconds to the physical part (`tick_ts >> 18`), then shift back left.")
        phys = physical_time(value)
        if phys == limit:
            return wrong(f"The physical part is right ({ts_text(value)}): that read would wait. But it is not the largest: "
                         "waitTSafe does not compare logical parts, so the logical part can be as large as 18 bits "
                         "allow.")
        if phys == limit + 1:
            return wrong("One millisecond too far: the lag would be maxTimestampLag plus 1 ms, more than the limit, "
                         "and the read is refused. The limit itself still waits (the test is `lag > max`).")
        if phys == physical_time(tsafe) + max_lag_ns // 1000 or phys == physical_time(tsafe) + max_lag_ns:
            return wrong("The physical part counts milliseconds, and maxTimestampLag is 86,400 s: "
                         f"{max_ms:,} ms.")
        if phys > limit:
            return wrong(f"{ts_text(value)} is {phys - physical_time(tsafe):,} ms past tsafe {ts_text(tsafe)}: more than "
                         f"maxTimestampLag ({max_ms:,} ms), so it would be refused.")
        return wrong(f"{ts_text(value)} would wait, but a larger guarantee would too: add maxTimestampLag ({max_ms:,} "
                     f"ms) to the physical part of the tsafe the refused read found (its `tick_ts`).")

    return judge_integer(answer, "an int: a hybrid timestamp", judge, timestamp=True)
