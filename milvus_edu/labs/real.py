"""Self-checks for lab 6, the model and a real Milvus (notebooks/06_real_milvus.ipynb)."""

from __future__ import annotations

import pandas as pd

from ..events import SIM_EPOCH_MS
from ..narrate import detail_dict
from ..tsoutil import LOGICAL_BITS
from ..client.workload import OPS, READ_OPS
from .feedback import judge_integer, name_answer, right, shown, wrong

#: A timestamp whose physical part is within this of the model's clock zero is from a model run, not the server.
DAY_MS = 86_400_000
#: The calls a workload makes that could return a timestamp (every op but the DDL ones).
CALLS = tuple(op for op in OPS if not op.endswith("_collection"))


def check_sampled_tick(answer, events: pd.DataFrame, seq: int):
    """Exercise 1: the hybrid timestamp of the sampled time tick at row ``seq`` of a real run, from its ``detail``
    (the sample's wall clock minus the lag, shifted left 18 bits)."""
    rows = events[(events["seq"] == seq) & events["tick_ts"].notna()]
    d = detail_dict(rows["detail"].iloc[0]) if len(rows) else {}
    if "sampled_clock_ms" not in d or "lag_ms" not in d:
        return wrong(f"Row {shown(seq)} of these events is not a sampled time tick of a real run; run the cells "
                     "above again (they pick the row), and pass the real run's events.")
    expected = int(rows["tick_ts"].iloc[0])
    clock, lag = int(d["sampled_clock_ms"]), int(d["lag_ms"])

    def judge(value: int):
        if value == expected:
            return right(f"{value} = ({clock} - {lag}) << 18: the physical part is the sample's wall clock "
                         "minus the lag the gauge held, and the logical part is 0 (a gauge in ms cannot say "
                         "it). The gauge was set up to one sampling period before the sample, so the real "
                         "tick's timestamp may be up to that much smaller.")
        if value == clock - lag:
            return wrong(f"{value} is the physical part in ms; a hybrid timestamp puts it above 18 logical bits: "
                         "shift it left by 18.")
        if value == (clock + lag) << 18:
            return wrong("The lag is how far the tick is *behind* the wall clock: subtract it.")
        if value == clock << 18:
            return wrong("That is the sample's wall clock as a timestamp; the tick is `lag_ms` older.")
        return wrong(f"Not this tick's timestamp. Take `sampled_clock_ms` ({clock}) and `lag_ms` "
                     f"({lag}) from the row's detail.")

    return judge_integer(answer, "an int (a hybrid timestamp)", judge, timestamp=True)


def check_zero_ts_call(answer):
    """Exercise 2: which write of Milvus 2.3.5 returns timestamp 0 (``'delete'``)."""
    name, pending = name_answer(answer, CALLS)
    if pending is not None:
        return pending
    if name == "delete":
        return right("On 2.3.5 a delete's MutationResult has timestamp 0, so pymilvus's Session table does not move "
                     "and a Session read after the client's own delete waits only for its earlier insert. Milvus 2.5 "
                     "returns the delete's timestamp, as the model does.")
    if name == "insert":
        return wrong("The real insert's `client.insert` row has a timestamp (MutationResult.timestamp); look at the "
                     "`client.delete` rows of the real run.")
    if name in READ_OPS:
        return wrong("A read returns no timestamp on 2.3.5 either (session_ts 0), but the question is about a write: "
                     "the one that moves pymilvus's Session table.")
    if name in CALLS:  # the flush
        return wrong("A flush is not a write with a timestamp in pymilvus; look at the `client.delete` rows.")
    return wrong(f"Answer with one of {', '.join(CALLS)}.")


def check_session_guarantee(answer, real_events: pd.DataFrame, request: int):
    """Exercise 3: the real Session read ``request`` sent the timestamp of its client's last insert as its guarantee
    (the delete between them returned 0)."""
    reads = real_events[(real_events["kind"] == "client.read_start") & (real_events["request"] == request)
                        & real_events["guarantee_ts"].notna()]
    if not len(reads):
        return wrong(f"Request {shown(request)} is not a read with a guarantee timestamp in these events; run the "
                     "cells above again (they pick the Session read), and pass the real run's events.")
    read = reads.iloc[0]
    expected = int(read["guarantee_ts"])
    client = read["node"]
    mine = real_events[(real_events["node"] == client) & (real_events["seq"] < read["seq"])]
    inserts = mine[mine["kind"] == "client.insert"]
    insert_ts = {int(t) for t in inserts["ts"].dropna()}
    later = real_events[(real_events["node"] == client) & (real_events["seq"] > read["seq"])
                        & (real_events["kind"] == "client.insert")]
    later_ts = {int(t) for t in later["ts"].dropna()}

    def judge(value: int):
        if value == expected:
            return right(f"{value}: the timestamp {client}'s insert returned. Its delete came later but "
                         "returned 0, and pymilvus keeps the largest timestamp it was given, so the Session read "
                         "asked only for the insert: tsafe was already past it, and the read did not wait for the "
                         "delete.")
        if value == 0:
            return wrong("0 is what the delete returned; pymilvus keeps the largest timestamp it has seen for the "
                         "collection, and 0 never replaces anything.")
        if value in insert_ts:
            return wrong("That is an insert of this client, but not its last one before the read.")
        if value in later_ts:
            return wrong("That insert came after the read: pymilvus can only send a timestamp it has "
                         "already been given.")
        if abs((value >> LOGICAL_BITS) - SIM_EPOCH_MS) < DAY_MS:
            return wrong("That timestamp is from the model's clock (its runs start on 1 January 2026); "
                         "take it from `session.real_events`, the real server's run.")
        return wrong(f"Look at the `guarantee_ts` of the read's `client.read_start` row, and at the `ts` of "
                     f"{client}'s `client.insert` rows before it.")

    return judge_integer(answer, "an int (a hybrid timestamp)", judge, timestamp=True)
