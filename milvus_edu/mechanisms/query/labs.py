"""Self-checks for ``notebooks/04_guarantee_ts.ipynb`` (see :mod:`milvus_edu.labs.feedback`).

Every check judges the answer against the run the notebook made (its log), or runs the learner's own workload,
never against a number written into this file, so it stays right for any seed. Typical wrong answers (event
numbers for request numbers, the guarantee for the read timestamp, the tsafe a read found on arrival, a level
whose guarantee comes from somewhere else, a Session read that started before the write was acknowledged) get a
message naming the mistake.
"""

from __future__ import annotations

import numbers

import pandas as pd

from ...narrate import detail_dict, plural, ts_text
from ...labs.feedback import (TOO_LARGE, Feedback, is_time, judge_integer, name_answer, not_hybrid, pending,
                               right, shown, wrong)

LEVEL_NAMES = ("Strong", "Session", "Bounded", "Eventually", "Customized")


def read_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per answered or failed read of a run, for reading in a notebook: ``event`` (the slider's number),
    ``t (s)`` (when it returned), ``client``, ``request``, ``label``, ``level``, ``guarantee``, ``read at`` (hybrid
    timestamps as text), ``rows`` and ``error``.

    A failed read's own row carries no level or guarantee, so they come from the read's earlier rows: the level the
    proxy settled (``proxy.read``, else the one the SDK sent, ``client.read_start``) and the guarantee the proxy
    asked the shards for. A read that never reached a proxy has no guarantee (``None``)."""
    r = _reads(events)
    detail = r["detail"].map(detail_dict)
    request = r["request"].astype("Int64")

    def by_request(kind: str, column: str) -> dict:
        rows = events[(events["kind"] == kind) & events[column].notna()]
        return dict(zip(rows["request"].astype("Int64"), rows[column]))

    sent, settled = by_request("client.read_start", "level"), by_request("proxy.read", "level")
    asked = by_request("proxy.read", "guarantee_ts")
    level = [lv if isinstance(lv, str) else settled.get(q, sent.get(q)) for lv, q in zip(r["level"], request)]
    guarantee = [g if not pd.isna(g) else asked.get(q) for g, q in zip(r["guarantee_ts"], request)]

    def show(ts):
        return None if ts is None or pd.isna(ts) else ts_text(int(ts))

    return pd.DataFrame({"event": (r["seq"] + 1).to_numpy(), "t (s)": (r["t_ms"] / 1000).round(3).to_numpy(),
                         "client": r["node"].to_numpy(), "request": request.to_numpy(),
                         "label": detail.map(lambda d: d.get("label", "")).to_numpy(), "level": level,
                         "guarantee": [show(g) for g in guarantee], "read at": [show(t) for t in r["ts"]],
                         "rows": detail.map(lambda d: d.get("pks")).to_numpy(), "error": r["error"].to_numpy()})


def _reads(events: pd.DataFrame) -> pd.DataFrame:
    """The ``client.read`` rows of a run (answered and failed)."""
    return events[events["kind"] == "client.read"]


def _keys(pks) -> str:
    pks = list(pks or [])
    return ", ".join(str(p) for p in pks) if pks else "nothing"


def _label(row) -> str:
    label = detail_dict(row["detail"]).get("label")
    return f" '{label}'" if label else ""


# ---- Exercise 1 ---------------------------------------------------------------------------------
def empty_reads(events: pd.DataFrame) -> list[int]:
    """The request numbers of the reads that were answered with no row, in order."""
    r = _reads(events)
    return sorted(int(x) for x in r[r["error"].isna() & (r["count"] == 0)]["request"])


def _int_list(answer) -> tuple[list[int] | None, Feedback | None]:
    if isinstance(answer, (str, bytes)) or isinstance(answer, numbers.Number) or isinstance(answer, dict):
        return None, wrong(f"Got a value of type {type(answer).__name__}; expected a list of request numbers (ints), "
                           "e.g. [1, 4].")
    if isinstance(answer, pd.DataFrame):
        return None, wrong(f"That is a pandas DataFrame ({plural(len(answer), 'row')}); take its `request` column, e.g. "
                           "`sorted(int(r) for r in frame.request)`.")
    try:
        items = list(answer)
    except TypeError:
        return None, wrong(f"Got a value of type {type(answer).__name__}; expected a list of request numbers (ints).")
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral) or is_time(x):
            return None, wrong(f"{shown(x)} in your list is a value of type {type(x).__name__}; every item must be a request number "
                               "(an int), e.g. [1, 4].")
        if abs(int(x)) >= TOO_LARGE:
            return None, wrong(f"{shown(x)} in your list is far beyond any request number; the requests of a run are "
                               "numbered from 1.")
        out.append(int(x))
    return out, None


def check_empty_reads(answer, events: pd.DataFrame) -> Feedback:
    """Exercise: which reads of ``insert-then-search`` came back empty (their request numbers)."""
    if answer is None:
        return pending("a list of request numbers (ints), e.g. [1, 4]")
    got, verdict = _int_list(answer)
    if verdict is not None:
        return verdict
    want = set(empty_reads(events))
    reads = _reads(events)
    by_request = {int(r["request"]): r for r in reads.to_dict("records")}
    levels = sorted({by_request[q]["level"] for q in want})
    if set(got) == want:
        behind = [int(r["ts"]) for q, r in by_request.items() if q in want]
        return right(f"Right: {plural(len(want), 'read')}, all at {' and '.join(levels)}: {', '.join(map(str, sorted(want)))}. "
                     "A Bounded read's guarantee is the proxy's clock minus 5 s, always already below tsafe, so it "
                     "never waits: it reads at the tsafe it finds, the last time tick, which is older than the insert "
                     "acknowledged a few milliseconds before. Session and Strong wait for a tick past the write."
                     if behind else "Right: no read came back empty in this run.")
    seqs = {int(r["seq"]): q for q, r in by_request.items()}
    if got and all(g - 1 in seqs for g in got) and {seqs[g - 1] for g in got} == want:
        return wrong("Those are event numbers (the slider's, `seq + 1`), not request numbers: give the `request` "
                     "column of the client.read rows.")
    if got and all(g in seqs for g in got) and {seqs[g] for g in got} == want:
        return wrong("Those are the rows' `seq` values, not request numbers: give the `request` column of the "
                     "client.read rows.")
    unknown = sorted(set(got) - set(by_request))
    if unknown:
        return wrong(f"There is no read #{unknown[0]} in this run: the requests are numbered 1 to {len(by_request)}.")
    extra = sorted(set(got) - want)
    if extra:
        r = by_request[extra[0]]
        return wrong(f"Read #{extra[0]} ({r['level']}{_label(r)}) returned {_keys(detail_dict(r['detail']).get('pks'))}"
                     ": it is not empty. Look at each read's `count` (or its rows), not at its level alone.")
    missing = sorted(want - set(got))
    return wrong(f"You left out {plural(len(missing), 'empty read')} (e.g. #{missing[0]}). Every read whose `count` is 0 "
                 f"counts; they are all at {' and '.join(levels)}.")


# ---- Exercise 2 ---------------------------------------------------------------------------------
def read_facts(events: pd.DataFrame, request: int) -> dict:
    """What the log says about read ``request``: its client.read row, proxy.read row and shard reads."""
    mine = events[events["request"].astype("Int64") == request]
    client = mine[mine["kind"] == "client.read"]
    if client.empty:
        raise ValueError(f"the run has no read #{request}")
    shards = mine[(mine["kind"] == "querynode.read") & mine["error"].isna()]
    proxy = mine[mine["kind"] == "proxy.read"]
    return {"client": client.iloc[0].to_dict(), "proxy": proxy.iloc[0].to_dict() if len(proxy) else None,
            "shards": shards.to_dict("records")}


def check_read_ts(answer, events: pd.DataFrame, request: int) -> Feedback:
    """Exercise: the read timestamp of read ``request`` (the ``ts`` of its client.read row)."""
    f = read_facts(events, request)
    c = f["client"]
    want, guarantee = int(c["ts"]), int(c["guarantee_ts"])
    shards = f["shards"]
    arrivals = sorted({int(s["tick_ts"]) for s in shards})
    shard_ts = sorted({int(s["ts"]) for s in shards})
    begin = int(f["proxy"]["ts"]) if f["proxy"] is not None else None
    waited = max(float(detail_dict(s["detail"]).get("waited_ms") or 0.0) for s in shards) if shards else 0.0
    # the tsafe steps the read's shards took while it waited, short of the one it read at (section 1's 1.100+1)
    since = int(f["proxy"]["seq"]) if f["proxy"] is not None else -1
    steps = events[(events["kind"] == "querynode.tsafe") & events["vchannel"].isin({s["vchannel"] for s in shards})
                   & (events["seq"] > since) & (events["seq"] < int(c["seq"]))]
    passed = {int(t) for t in steps["ts"] if int(t) < guarantee}

    def judge(value: int) -> Feedback:
        if value == want:
            return right(f"Right: read #{request} read at {ts_text(want)}, its guarantee was {ts_text(guarantee)}. "
                         f"When it reached the shards their tsafe was {ts_text(arrivals[0])}, below the guarantee, so "
                         f"it waited {waited:,.0f} ms. tsafe does not move smoothly: it jumps from time tick to time "
                         f"tick, and the read runs at the tsafe the wait returned — the first tick at or past the "
                         f"guarantee, {ts_text(want)}. That tick's timestamp was taken from the TSO a little after "
                         f"the read's own, so it is larger. Reading later than promised is safe: the read sees "
                         f"everything up to its guarantee, and a little more.")
        if value == guarantee:
            return wrong(f"{ts_text(value)} is the read's guarantee: what every shard must have reached before it "
                         "reads. The read timestamp is the tsafe the wait returned: the `ts` of the client.read row "
                         "(or of the querynode.read rows).")
        if value in arrivals:
            return wrong(f"{ts_text(value)} is the tsafe the read found when it arrived (`tick_ts`), below its "
                         "guarantee: that is why it waited. The read timestamp is the tsafe after the wait: the `ts` "
                         "column.")
        if value in shard_ts:
            return wrong("That is one shard's read timestamp: the shards of one read can stop waiting at different "
                         "ticks, and the client.read row reports the smallest of them. Take the `ts` of the "
                         "client.read row.")
        if value in passed:
            return wrong(f"{ts_text(value)} is a tsafe the shards reached while the read waited, still below its "
                         f"guarantee {ts_text(guarantee)}: the read went on waiting for the next tick. The read "
                         "timestamp is the tsafe the wait returned: the `ts` of the client.read row.")
        slip = not_hybrid(value, want)
        if slip is not None:
            return slip
        if begin is not None and value == begin:
            return wrong("That is the proxy's begin timestamp (proxy.read). Take the `ts` of the client.read row.")
        return wrong(f"{ts_text(value)} is not it. Take the `ts` of the client.read row whose `request` is "
                     f"{request}, as an int.")

    return judge_integer(answer, "an int: a hybrid timestamp", judge, timestamp=True)


# ---- Exercise 3 ---------------------------------------------------------------------------------
def check_clock_level(answer) -> Feedback:
    """Exercise: the consistency level whose guarantee comes from the proxy's own clock."""
    names = ", ".join(f"'{n}'" for n in LEVEL_NAMES)
    a, verdict = name_answer(answer, LEVEL_NAMES)
    if verdict is not None:
        return verdict
    if a == "bounded":
        return right("Right: Bounded (the default) skips the TSO: the proxy takes its begin timestamp from its own "
                     "clock and asks for that minus common.gracefulTime (5 s). A clock ahead asks for the future and "
                     "waits (issue #16841); a clock behind asks for older data than promised, silently.")
    if a == "strong":
        return wrong("Strong asks the TSO (rootcoord) for a fresh timestamp: its guarantee is the newest timestamp "
                     "there is, whatever the proxy's clock says. That is why only Strong pays a round trip to "
                     "rootcoord.")
    if a == "session":
        return wrong("Session's guarantee comes from the client: the SDK's cache of the client's last write "
                     "timestamp (1 when it has not written).")
    if a == "eventually":
        return wrong("Eventually's begin timestamp does come from the proxy's clock, but its guarantee is the "
                     "constant 1: it never waits, so the clock does not matter. Which level's guarantee is the "
                     "clock minus something?")
    if a == "customized":
        return wrong("Customized uses the guarantee_timestamp the user passed, unchanged.")
    return wrong(f"{shown(answer)} is not a consistency level; answer with one of {names}.")


# ---- Exercise 5 ---------------------------------------------------------------------------------
def check_ddl_age(answer, events: pd.DataFrame) -> Feedback:
    """Exercise: how old (whole ms) the DDL minimum is when rootcoord sends it: ``rootcoord.ticker_start``'s
    ``detail.sync_ts_phase_ms`` in the run ``events`` (within 1 ms)."""
    start = events[events["kind"] == "rootcoord.ticker_start"]
    if start.empty:
        raise ValueError("the run has no rootcoord.ticker_start event: run a scenario with rootcoord's timetick loops")
    phase = float(detail_dict(start["detail"].iloc[0])["sync_ts_phase_ms"])
    proxies = {}
    for r in events[events["kind"] == "proxy.ticker_start"].itertuples(index=False):
        d = detail_dict(r.detail)
        proxies[f"{r.node}'s tickLoop phase"] = float(d["tick_phase_ms"])
        proxies[f"{r.node}'s report loop phase"] = float(d["report_phase_ms"])
    sends = events[(events["kind"] == "rootcoord.timetick_update") & (events["peer"] == "ddl")]["t_ms"]
    interval = float(sends.diff().median()) if len(sends) > 1 else None  # the DDL sends' spacing

    def judge(value: int) -> Feedback:
        if abs(value - phase) <= 1:
            return right(f"Right: syncTsLoop ticks {phase:.1f} ms before each tick of startTimeTickLoop "
                         f"(`rootcoord.ticker_start`, `detail.sync_ts_phase_ms`), so each round's DDL minimum was taken "
                         f"from the TSO {phase:.0f} ms before it is sent. A Strong read whose guarantee falls in those "
                         f"{phase:.0f} ms cannot be covered by that round: it waits for the next.")
        if interval is not None and abs(value - (interval - phase)) <= 1:
            return wrong(f"{value} ms is how long *after* a send syncTsLoop ticks again (the interval, {interval:.0f} "
                         f"ms, minus the phase). The age at the send is the time from the sync to the send.")
        for what, v in proxies.items():
            if abs(value - v) <= 1:
                return wrong(f"{value} ms is {what}: a proxy's loop, not rootcoord's. Look at the "
                             "`rootcoord.ticker_start` event.")
        return wrong(f"{value} ms is not it. Find the `rootcoord.ticker_start` event of the run and read its "
                     "`detail`.")

    return judge_integer(answer, "an int: milliseconds", judge, timestamp=False)


# ---- Exercise 4 ---------------------------------------------------------------------------------
def run_steps(steps, seed: int = 1, switches=None):
    """Run a workload (a list of step dicts) on the query cluster; the run's result (``.events``, ``.summary``)."""
    from ...sim.run import simulate

    return simulate("workload", seed=seed, switches=switches, options={"steps": list(steps)})


def _writes(events: pd.DataFrame, client: str) -> list[dict]:
    w = events[(events["kind"] == "client.insert") & (events["node"] == client) & events["error"].isna()]
    return w.to_dict("records")


def _session_reads(events: pd.DataFrame, client: str) -> list[dict]:
    """``client``'s answered reads, each with the seq its read began (client.read_start) and its rows."""
    starts = events[events["kind"] == "client.read_start"].set_index("request")["seq"].to_dict()
    out = []
    for r in _reads(events)[lambda f: (f["node"] == client) & f["error"].isna()].to_dict("records"):
        out.append({**r, "start_seq": int(starts.get(r["request"], r["seq"])),
                    "pks": set(detail_dict(r["detail"]).get("pks") or [])})
    return out


def _guarantee(g: int) -> str:
    return "1 (Client2 had written nothing, so nothing to wait for)" if g <= 1 else ts_text(g)


def session_miss(events: pd.DataFrame) -> tuple[dict, dict, dict] | None:
    """``(Client1's insert, Client2's Session read that misses it, Client1's Session read that sees it)``, both
    reads begun after the insert was acknowledged; ``None`` when the run has no such three."""
    c2 = [r for r in _session_reads(events, "Client2") if r["level"] == "Session"]
    c1 = [r for r in _session_reads(events, "Client1") if r["level"] == "Session"]
    for w in _writes(events, "Client1"):
        keys = set(detail_dict(w["detail"]).get("pks") or [])
        miss = [r for r in c2 if r["start_seq"] > w["seq"] and not keys & r["pks"]]
        see = [r for r in c1 if r["start_seq"] > w["seq"] and keys <= r["pks"]]
        if miss and see:
            return w, miss[0], see[0]
    return None


def check_session_workload(answer, seed: int = 1) -> Feedback:
    """Exercise: a workload (list of step dicts) in which a Session read of Client2 misses Client1's acknowledged
    write while Client1's own Session read sees it. Runs it and says what is missing."""
    from ...client.workload import parse_steps

    if answer is None:
        return pending("a list of step dicts, e.g. [{'at': 0.5, 'client': 'Client1', 'op': 'create_collection', "
                       "'collection': 'C0'}, ...]")
    if not isinstance(answer, (list, tuple)):
        return wrong(f"Got a value of type {type(answer).__name__}; expected a list of step dicts (a workload).")
    try:
        parse_steps(answer)
    except ValueError as exc:
        return wrong(f"That workload does not parse: {exc}")
    run = run_steps(answer, seed=seed)
    ev = run.events
    errors = ev[(ev["kind"] == "client.error") | ((ev["kind"] == "client.read") & ev["error"].notna())]
    if not _writes(ev, "Client1"):
        first = f" (first error: {errors['error'].iloc[0]})" if len(errors) else ""
        return wrong("Client1 never had an insert acknowledged: create the collection, then let Client1 insert a "
                     f"row, e.g. {{'op': 'insert', 'data': [{{'id': 'A1'}}], ...}}{first}.")
    found = session_miss(ev)
    if found is not None:
        w, miss, see = found
        return right(f"Right: Client1's insert of {_keys(detail_dict(w['detail']).get('pks'))} was acknowledged at "
                     f"{ts_text(int(w['ts']))} (event {int(w['seq']) + 1:,}). Client2's Session read #{miss['request']} "
                     f"began after that and read at {ts_text(int(miss['ts']))} with guarantee "
                     f"{_guarantee(int(miss['guarantee_ts']))}: Session waits only for the client's *own* last write, "
                     f"so it took the tsafe it found, still below Client1's write. Client1's Session read "
                     f"#{see['request']} waited for its write and saw it. Session is read-your-own-writes, not "
                     f"read-everyone's.")
    c2_all = _session_reads(ev, "Client2")
    c2 = [r for r in c2_all if r["level"] == "Session"]
    c1 = [r for r in _session_reads(ev, "Client1") if r["level"] == "Session"]
    if not c2:
        other = f" (its reads ran at {', '.join(sorted({str(r['level']) for r in c2_all}))})" if c2_all else ""
        return wrong(f"Client2 made no answered Session read{other}: give Client2 a search or query with "
                     "'consistency_level': 'Session' (without it the read runs at the collection's default, Bounded).")
    if not c1:
        return wrong("Client1 made no answered Session read: add a query or search by Client1 with "
                     "'consistency_level': 'Session' after its insert.")
    first_write = min(int(w["seq"]) for w in _writes(ev, "Client1"))
    if all(r["start_seq"] < first_write for r in c2):
        return wrong("Every Session read of Client2 began before Client1's insert was acknowledged, so missing it "
                     "proves nothing. Start Client2's read after the insert returned: an `at` a little later "
                     "(say 0.02 s after the insert), but before the next time tick reaches the QueryNode.")
    if all(r["start_seq"] < first_write for r in c1):
        return wrong("Client1's Session reads all began before its insert was acknowledged. Put Client1's read "
                     "after its insert (a later `at`, or the next step of the same client).")
    return wrong("Client2's Session reads saw Client1's write: tsafe had already passed it when they arrived. Time "
                 "ticks come every 200 ms; read within a few tens of milliseconds after the insert was acknowledged "
                 "(and make sure Client2 has not written anything itself just before: its own write would make "
                 "it wait).")
