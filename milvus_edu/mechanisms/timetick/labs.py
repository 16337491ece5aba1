"""Self-checks for ``notebooks/02_timetick.ipynb`` (see :mod:`milvus_edu.labs.feedback`).

Every check judges the answer against the run log the notebook made, never against a number
written into this file, so it stays right for any seed. Typical wrong answers (counting adjacent
swaps instead of out-of-order messages, taking one session's value instead of the minimum over all
sessions, counting a whole pchannel instead of one vchannel) get a message naming the mistake.
"""

from __future__ import annotations

import json

import pandas as pd

from ...narrate import ts_text
from .kinds import DML_TYPES
from .panel import dml_messages
from ...labs.feedback import Feedback, judge_integer, name_answer, not_hybrid, right, shown, wrong

INVARIANT_NAMES = ("tick-monotonic", "watermark", "pack-exact")


def _dml(events: pd.DataFrame) -> pd.DataFrame:
    return events[(events["kind"] == "mq.produce") & events["msg_type"].isin(DML_TYPES)]


# ---- Exercise 1 ---------------------------------------------------------------------------------
def out_of_order_count(events: pd.DataFrame, channel: str) -> tuple[int, int]:
    """``(out of order, adjacent swaps)`` among the DML messages written to ``channel``, in log order.

    Out of order is :func:`.panel.dml_messages`'s one definition (``end_ts`` below the largest ``end_ts`` written
    to the channel before it); an adjacent swap, the typical wrong answer, only compares a message with the one
    just before it.
    """
    return _out_of_order(dml_messages(events), channel)


def _out_of_order(msgs: pd.DataFrame, channel: str) -> tuple[int, int]:
    on = msgs[msgs["channel"] == channel]
    end_ts = on["end_ts"].to_numpy()
    return int(on["out_of_order"].sum()), int((end_ts[1:] < end_ts[:-1]).sum())


def check_out_of_order(answer, events: pd.DataFrame, channel: str) -> Feedback:
    """Exercise: how many DML messages were written to ``channel`` below a timestamp already written there."""

    def judge(value: int) -> Feedback:  # reads the run only for an answer that is a number
        msgs = dml_messages(events)  # once: the right answer and the every-pchannel slip both read it
        want, swaps = _out_of_order(msgs, channel)
        mine = _dml(events)
        mine = mine[mine["channel"] == channel]
        total = len(mine)
        as_float = mine["end_ts"].astype("int64").astype("float64")
        rounded = int((as_float < as_float.cummax().shift(1)).sum())
        everywhere = int(msgs["out_of_order"].sum())
        if value == want:
            return right(f"Right: {want:,} of the {total:,} messages on {channel} came after a message with a larger "
                         f"timestamp. Nothing in the pchannel is sorted: only the time ticks make it safe to read.")
        if value == rounded and rounded != want:
            return wrong("Your logic is right, but the numbers went through float64 (pandas' `shift` does that to "
                         "int64), which rounds a hybrid timestamp's low bits - its logical part - away. Compare with "
                         "`ts.cummax()` without `shift`, or keep int64 with `shift(fill_value=0)`.")
        if value == swaps:
            return wrong("That counts messages below the one just before them. A message is out of order when it "
                         "is below ANY message written before it on the pchannel: keep a running maximum.")
        if value == everywhere and everywhere != want:
            return wrong(f"That counts every pchannel. Take only the rows whose channel is {channel}.")
        if value == total:
            return wrong("That is every DML message on the pchannel. Count only those whose end_ts is below the "
                         "largest end_ts written to the pchannel before them.")
        return wrong(f"{value:,} is not it. Walk the mq.produce rows of {channel} with msg_type Insert in seq "
                     "order, keep the largest end_ts so far, and count the rows below it.")

    return judge_integer(answer, "an int: a number of messages", judge, timestamp=False)


# ---- Exercise 2 ---------------------------------------------------------------------------------
def round_values(events: pd.DataFrame, round_seq: int, channel: str) -> dict[str, int]:
    """What every session had reported for ``channel`` when the round at ``round_seq`` went out.

    ``round_seq`` is a ``rootcoord.timetick_update`` whose ``detail.sent`` is true. The value of a session
    is the one in the latest report rootcoord took from it up to that event: the pchannel's own value
    when the report listed the pchannel, else its default (the DDL source, ``ddl``, uses its default).
    """
    updates = events[(events["kind"] == "rootcoord.timetick_update") & (events["seq"] <= round_seq)]
    values: dict[str, int] = {}
    for row in updates.itertuples():
        if _is_na(row.ts) or not isinstance(row.detail, str):
            continue
        listed = json.loads(row.detail).get("channels", {})
        values[row.peer] = int(listed.get(channel, row.ts))
    return values


def round_tick(events: pd.DataFrame, round_seq: int, channel: str) -> int | None:
    """The time tick written to ``channel`` by the round that the event ``round_seq`` sent out."""
    ticks = events[(events["kind"] == "mq.produce") & (events["msg_type"] == "TimeTick")
                   & (events["channel"] == channel) & (events["seq"] > round_seq)]
    return int(ticks["tick_ts"].iloc[0]) if len(ticks) else None


def check_round_tick(answer, events: pd.DataFrame, round_seq: int, channel: str) -> Feedback:
    """Exercise: the tick the round at ``round_seq`` writes to ``channel``: the minimum over all sessions."""
    want = round_tick(events, round_seq, channel)
    values = round_values(events, round_seq, channel)
    if want is None:
        return wrong("This run has no tick after that round; run the cells above again.")
    if isinstance(answer, str) and answer.strip() == ts_text(want):
        return wrong(f"That is the right value, printed as text. Give it as the int it stands for: {want}.")
    defaults = _defaults(events, round_seq)

    def judge(value: int) -> Feedback:
        if value == want:
            who = [k for k, v in values.items() if v == want]
            return right(f"Right: {ts_text(want)}, the smallest value any session reported for {channel} "
                         f"(it came from {', '.join(who) or 'one session'}). Nothing at or below it can still come.")
        if value == max(values.values(), default=None):
            return wrong("That is the largest value. A tick is a promise for every writer, so it must wait for "
                         "the slowest: take the minimum over all sessions.")
        listed_over = [k for k, v in defaults.items() if v == value and values.get(k) != value]
        if listed_over:
            return wrong(f"That is {listed_over[0]}'s default, but {listed_over[0]} listed {channel} with its own "
                         "value: a listed value wins over the default for that pchannel.")
        if value in values.values():
            name = next(k for k, v in values.items() if v == value)
            return wrong(f"That is {name}'s value, but not the smallest one. Take the minimum over every session "
                         f"(the proxies and the DDL source 'ddl').")
        slip = not_hybrid(value, want)
        if slip is not None:
            return slip
        if any(value == v - 1 for v in values.values()):
            return wrong("The proxies already subtracted 1 (minTs - 1) before reporting; rootcoord takes the "
                         "reported values as they are.")
        return wrong(f"{ts_text(value)} is not a value any session reported for {channel}. For each proxy use "
                     "its latest report: the value listed for the pchannel, or its default when it is not listed; "
                     "add the DDL source's default; take the minimum.")

    return judge_integer(answer, "an int: a hybrid timestamp", judge, timestamp=True)


def _defaults(events: pd.DataFrame, round_seq: int) -> dict[str, int]:
    """Every session's default in the latest report rootcoord took from it up to ``round_seq``."""
    updates = events[(events["kind"] == "rootcoord.timetick_update") & (events["seq"] <= round_seq)]
    return {row.peer: int(row.ts) for row in updates.itertuples() if not _is_na(row.ts)}


# ---- Exercise 3 ---------------------------------------------------------------------------------
def check_pack_count(answer, events: pd.DataFrame, pack_seq: int) -> Feedback:
    """Exercise: how many DML messages the pack at ``pack_seq`` (an ``mq.pack`` row) holds, from the writes."""

    def judge(value: int) -> Feedback:  # reads the run only for an answer that is a number
        pack = events[events["seq"] == pack_seq].iloc[0]
        begin, end, vch = int(pack["begin_ts"]), int(pack["end_ts"]), pack["vchannel"]
        dml = _dml(events)
        in_vch = dml[dml["vchannel"] == vch]
        want = int(((in_vch["end_ts"] > begin) & (in_vch["end_ts"] <= end)).sum())
        on_pch = int(((dml["channel"] == pack["channel"]) & (dml["end_ts"] > begin) & (dml["end_ts"] <= end)).sum())
        closed = int(((in_vch["end_ts"] >= begin) & (in_vch["end_ts"] <= end)).sum())
        open_end = int(((in_vch["end_ts"] > begin) & (in_vch["end_ts"] < end)).sum())
        packs = events[(events["kind"] == "mq.pack") & (events["vchannel"] == vch) & (events["seq"] < pack_seq)]
        since = float(packs["t_ms"].iloc[-1]) if len(packs) else 0.0
        by_arrival = int(((in_vch["t_ms"] > since) & (in_vch["t_ms"] <= float(pack["t_ms"]))).sum())
        if value == want:
            return right(f"Right: the pack ({ts_text(begin)}, {ts_text(end)}] of {vch} holds the {want:,} messages "
                         f"written to it with begin_ts < ts <= end_ts, whatever order they arrived in.")
        if value == on_pch and on_pch != want:
            return wrong(f"That counts the whole pchannel {pack['channel']}. The dispatcher splits it: this pack is "
                         f"only {vch}'s messages.")
        if value == by_arrival and by_arrival != want:
            return wrong("That counts the messages that arrived between the two packs. A pack is cut by timestamp, "
                         "not by arrival: a message that arrived early waits for its interval, a late one was in an "
                         "earlier pack's interval already.")
        if value == closed and closed != want:
            return wrong("The interval is open at its start: a message at begin_ts belonged to the previous pack.")
        if value == open_end and open_end != want:
            return wrong("The interval includes its end: a message at exactly the tick is in this pack (EndTs <= tt).")
        return wrong(f"{value:,} is not it. Count the mq.produce rows with vchannel {vch} whose end_ts is above the "
                     "pack's begin_ts and at most the pack's end_ts (pack.begin_ts < row.end_ts <= pack.end_ts).")

    return judge_integer(answer, "an int: a number of messages", judge, timestamp=False)


# ---- Exercise 4 ---------------------------------------------------------------------------------
def check_root_invariant(answer) -> Feedback:
    """Exercise: which invariant ``allocate_outside_enqueue_lock`` breaks at its root."""
    names = ", ".join(f"'{n}'" for n in INVARIANT_NAMES)
    a, verdict = name_answer(answer, INVARIANT_NAMES)
    if verdict is not None:
        return verdict
    if a == "watermark":
        return right("Right: a proxy reported a minimum above a task it had not counted yet, rootcoord wrote that as "
                     "a tick, and the task's message came after the tick. The packs go wrong only because of it.")
    if a.replace("-", "") == "packexact":
        return wrong("'pack-exact' breaks too, but as a consequence: the consumer closed the pack when the tick "
                     "arrived. What broke first, on the writing side?")
    if a.replace("-", "") == "tickmonotonic":
        return wrong("The ticks still never go back; each round's minimum is fine as far as rootcoord knows. "
                     "What does a tick promise about the messages written after it?")
    if "lock" in a or "alloc" in a:
        return wrong(f"{shown(answer)} is the bug switch; name the invariant (checker) it breaks: one of {names}.")
    return wrong(f"{shown(answer)} is not an invariant name; answer with one of {names}.")


def _is_na(value) -> bool:
    try:
        return value is None or value is pd.NA or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False
