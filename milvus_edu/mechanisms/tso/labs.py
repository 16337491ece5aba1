"""Self-checks for ``notebooks/01_tso.ipynb``.

Every ``check_*`` function returns a :class:`Feedback` that prints as one friendly paragraph and is
truthy only when the answer is right, so a notebook cell can both show it and ``assert`` it.

The lab ships every exercise as ``answer_N = None``; a check given ``None`` says
"⏳ Not answered yet: ..." and what to put there (a falsy Feedback, never an exception). An answer
of the wrong type is judged as far as possible and the message says what to change: a number given
as a string (``"262143"``) is **not** accepted, even when its value is right, because the notebook
goes on computing with it; the message says the value is right and to drop the quotes. Wrong values
that students typically give (``physical << 18 + logical``, which Python reads as
``physical << (18 + logical)``; ``2**18``; a timestamp of the old active ...) get a message naming
the mistake.
"""

from __future__ import annotations


import pandas as pd

from ...narrate import ts_text, wall_text
from ...tsoutil import LOGICAL_BITS, compose_ts, parse_hybrid_ts
from ...labs.feedback import Feedback, judge_integer, name_answer, right, shown, wrong

INVARIANT_NAMES = ("global-monotonic", "client-monotonic", "window")


# ---- Exercise 1 ---------------------------------------------------------------------------------
def check_compose(answer, physical_ms: int, logical: int) -> Feedback:
    """Exercise: the hybrid ts of ``(physical_ms, logical)``, i.e. ``(physical_ms << 18) + logical``."""
    want = compose_ts(physical_ms, logical)

    def judge(value: int) -> Feedback:
        if value == want:
            return right(f"Right: ({physical_ms} << {LOGICAL_BITS}) + {logical} = {want}.")
        if value == physical_ms << (LOGICAL_BITS + logical):
            return wrong(f"Operator precedence: Python reads `physical << {LOGICAL_BITS} + logical` as "
                          f"`physical << ({LOGICAL_BITS} + logical)`, because `+` binds tighter than `<<`, so "
                          f"you shifted by {LOGICAL_BITS + logical} bits. Use parentheses: "
                          f"`(physical << {LOGICAL_BITS}) + logical`.")
        if value == physical_ms << LOGICAL_BITS:
            return wrong(f"That is the physical part shifted, with logical 0: the logical part ({logical}) "
                          f"is missing. Add it: `(physical << {LOGICAL_BITS}) + logical`.")
        for bits in (16, 17, 19, 20, 32):
            if value == (physical_ms << bits) + logical:
                return wrong(f"You shifted by {bits} bits; the logical part has {LOGICAL_BITS} bits, so shift "
                              f"the physical part left by {LOGICAL_BITS}.")
        if value == (logical << LOGICAL_BITS) + physical_ms:
            return wrong(f"Physical and logical are swapped: the physical part ({physical_ms} ms) goes in the "
                          f"high bits, the logical counter ({logical}) in the low {LOGICAL_BITS} bits.")
        if value == physical_ms * 1000 + logical:
            return wrong(f"The physical part is shifted left by {LOGICAL_BITS} bits (multiplied by "
                          f"2**{LOGICAL_BITS}), not multiplied by 1000.")
        if value == physical_ms * LOGICAL_BITS + logical:
            return wrong(f"`<< {LOGICAL_BITS}` multiplies by 2**{LOGICAL_BITS} = {1 << LOGICAL_BITS}, not by "
                          f"{LOGICAL_BITS}.")
        if value < 0:
            return wrong(f"{value} is negative; hybrid timestamps are unsigned 64-bit integers.")
        p, l = parse_hybrid_ts(value)
        return wrong(f"Your number decodes to physical {p} ms and logical {l}; it should decode to physical "
                      f"{physical_ms} ms and logical {logical}. Compute `(physical << {LOGICAL_BITS}) + logical`.")

    return judge_integer(answer, f"an int: the hybrid timestamp of physical {physical_ms} ms and logical "
                                  f"{logical}", judge, timestamp=True)


# ---- Exercise 2 ---------------------------------------------------------------------------------
def check_first_after_failover(answer, events: pd.DataFrame, client: str = "client-1") -> Feedback:
    """Exercise: the first timestamp of the first batch ``client`` got from the new active rootcoord.

    ``client-1`` of ``tso-failover`` asks for 10 timestamps at a time, so the first of a batch
    (``rootcoord.alloc_timestamp``'s ``ts``, what AllocTimestamp answers) and the last (``tso.alloc``'s
    ``ts``, what GenerateTSO returns) differ, and the check tells them apart.
    """
    actives = events[events["kind"] == "session.active"]
    if len(actives) < 2:
        return wrong("This run has no failover (fewer than two session.active events); use the "
                      "tso-failover scenario.")
    new = str(actives["node"].iloc[1])
    ok_rows = events["error"].isna()
    allocs = events[(events["kind"] == "rootcoord.alloc_timestamp") & ok_rows]
    mine = allocs[allocs["node"] == new]
    theirs = mine[mine["peer"] == client]
    if not len(theirs):
        return wrong(f"{client} got no timestamp from {new} in this run; use the tso-failover scenario, "
                      f"where client-1 asks for 10 timestamps at a time.")
    old = allocs[allocs["node"] != new]
    want = int(theirs["ts"].iloc[0])
    batch = int(theirs["count"].iloc[0])
    want_last = want + batch - 1
    old_last = int(old["ts"].iloc[-1] + old["count"].iloc[-1] - 1) if len(old) else None
    my_firsts = {int(x) for x in mine["ts"]}
    their_firsts = {int(x) for x in theirs["ts"]}
    other_firsts = {int(t): str(p) for t, p in zip(mine["ts"], mine["peer"]) if p != client}
    old_firsts = {int(x) for x in old["ts"]}
    tso_allocs = events[(events["kind"] == "tso.alloc") & ok_rows]
    my_lasts = {int(x) for x in tso_allocs[tso_allocs["node"] == new]["ts"]}
    old_lasts = {int(x) for x in tso_allocs[tso_allocs["node"] != new]["ts"]}
    init = events[(events["kind"] == "tso.init") & (events["node"] == new)]
    init_physical = int(init["physical_ms"].iloc[0]) if len(init) else None
    physicals = {int(x) for x in events["physical_ms"].dropna()}

    def judge(value: int) -> Feedback:
        if value == want:
            return right(f"Right: {client}'s first batch from {new} ran from {ts_text(want)} to "
                          f"{ts_text(want_last)} ({batch} timestamps), above {ts_text(old_last)}, the last one "
                          f"handed out before the crash." if old_last is not None else
                          f"Right: {client}'s first batch from {new} started at {ts_text(want)}.")
        if value in old_firsts or value in old_lasts or value == old_last:
            return wrong(f"{ts_text(value)} came from the old active, not from {new}. Keep only the "
                          f"rootcoord.alloc_timestamp events whose node is {new}.")
        if value == want_last:
            return wrong(f"{ts_text(value)} is the LAST timestamp of {client}'s first batch ({batch} "
                          f"timestamps): it is the ts of the tso.alloc event, GenerateTSO's return value. The "
                          f"FIRST of the batch is what AllocTimestamp answers: the ts of rootcoord.alloc_timestamp.")
        if value in my_lasts and value not in my_firsts:
            return wrong(f"{ts_text(value)} is the ts of a tso.alloc event, which records the LAST timestamp "
                          f"of a batch (GenerateTSO's return value). Use rootcoord.alloc_timestamp: its ts is "
                          f"the FIRST of the batch, the one AllocTimestamp answers.")
        if value in other_firsts:
            return wrong(f"{ts_text(value)} is one of {new}'s, but it went to {other_firsts[value]}; keep only "
                          f"the events whose peer is {client}.")
        if value in their_firsts:
            return wrong(f"{ts_text(value)} went to {client} from {new}, but not in its first batch; take the "
                          f"earliest (the run log is in seq order, so `.iloc[0]`).")
        if init_physical is not None and value == compose_ts(init_physical, 0):
            return wrong(f"That is {new}'s window start with logical 0 (from tso.init). GenerateTSO adds the "
                          f"count before it returns, so logical 0 is never handed out; look at the "
                          f"rootcoord.alloc_timestamp events instead.")
        if value in physicals:
            return wrong(f"{value} is a physical part in milliseconds ({wall_text(value)}), not a hybrid "
                          f"timestamp. Take the ts column.")
        return wrong(f"{value} is not a timestamp {new} handed out to {client}. Look at events of kind "
                      f"rootcoord.alloc_timestamp from {new} whose peer is {client}, column ts.")

    return judge_integer(answer, f"an int: the first `ts` of {client}'s first batch from {new}", judge,
                         timestamp=True)


# ---- Exercise 3 ---------------------------------------------------------------------------------
def check_max_per_tick(answer) -> Feedback:
    """Exercise: the most timestamps one physical value (one window start) can give before tsLoop
    moves physical on, with ``LimitMaxLogic`` on."""
    space = 1 << LOGICAL_BITS
    want = space - 1

    def judge(value: int) -> Feedback:
        if value == want:
            return right("Right: logical values 1 .. 2^18-1. GenerateTSO adds the count before it returns, so "
                          "logical 0 is never handed out, and 2^18 is rejected while LimitMaxLogic is on.")
        if value == space:
            return wrong("Close, but 2^18 is one too many. Which logical value does the very first allocation on "
                          "a new physical value get? GenerateTSO adds the count first, then returns, so logical 0 "
                          "is never handed out.")
        if value in (space // 2, space // 2 - 1, space // 2 + 1):
            return wrong("The half-space rule (move physical on by 1 ms once more than half the logical space is "
                          "used) only runs when tsLoop runs. Between two runs of tsLoop, GenerateTSO can go on "
                          "until the logical counter hits its limit.")
        if value in (50 * space, 50 * want, 50 * (space - 2)):
            return wrong("That counts 50 physical milliseconds. The physical part does not advance by itself "
                          "every millisecond: only tsLoop moves it on. Count the logical values of ONE physical "
                          "value.")
        if value == LOGICAL_BITS:
            return wrong(f"{LOGICAL_BITS} is the number of logical bits. How many different values do "
                          f"{LOGICAL_BITS} bits hold, and which of them can GenerateTSO return?")
        if value == 1:
            return wrong("Many timestamps share one physical value: the logical counter in the low 18 bits tells "
                          "them apart.")
        return wrong(f"{value} is not it. Think of the {LOGICAL_BITS} logical bits of one physical value "
                      f"(values 0 .. 2^{LOGICAL_BITS}-1) and of which of them GenerateTSO can hand out.")

    return judge_integer(answer, "an int: the number of timestamps", judge, timestamp=False)


# ---- Exercise 4 ---------------------------------------------------------------------------------
def check_broken_invariant(answer) -> Feedback:
    """Exercise: which checker catches ``tso_skip_load_on_init`` in tso-failover (a name from
    ``INVARIANT_NAMES``)."""
    names = ", ".join(f"'{n}'" for n in INVARIANT_NAMES)
    a, verdict = name_answer(answer, INVARIANT_NAMES)
    if verdict is not None:
        return verdict
    if a.replace("-", "") == "globalmonotonic":
        return right("Right: the new active starts at its own clock, 75 s behind, so its first timestamps are "
                      "below those already handed out.")
    if a == "window":
        return wrong("'window' holds here: the new active still saves a window ahead of its own physical part. "
                      "What goes wrong is the order across the two leaders.")
    if a.replace("-", "") == "clientmonotonic":
        return wrong("'client-monotonic' breaks too (each client sees time go back), but it follows from the "
                      "root one, which is about every timestamp handed out by any rootcoord.")
    if "skip" in a or "tso-" in a or "load" in a:
        return wrong(f"{shown(answer)} is the bug switch; name the invariant (checker) it breaks: one of {names}.")
    return wrong(f"{shown(answer)} is not an invariant name; answer with one of {names}.")


# ---- Exercise 5 ---------------------------------------------------------------------------------
def check_max_per_second(answer, tick_ms: int = 50) -> Feedback:
    """Exercise: the most timestamps one rootcoord can hand out per second with the default settings.

    ``tsLoop`` gives a new physical value every ``tick_ms`` (``UpdateTimestampStep``) and one physical value
    gives ``2^18 - 1`` timestamps, so the answer is ``(2^18 - 1) * 1000 / tick_ms``.
    """
    per_value = (1 << LOGICAL_BITS) - 1
    ticks = 1000 // tick_ms
    want = per_value * ticks

    def judge(value: int) -> Feedback:
        if value == want:
            return right(f"Right: tsLoop gives a new physical value {ticks} times a second, and each gives "
                         f"2^18 - 1 = {per_value:,} timestamps: {want:,} a second. A client that asks for more "
                         f"waits: GenerateTSO sleeps {tick_ms} ms and tries again.")
        if value == (1 << LOGICAL_BITS) * ticks:
            return wrong("Off by one per physical value: logical 0 is never handed out (GenerateTSO adds the count "
                         "first), so one physical value gives 2^18 - 1 timestamps, not 2^18.")
        if value in (per_value * 1000, (1 << LOGICAL_BITS) * 1000):
            return wrong("That counts a new physical value every millisecond, as the design documents' "
                         "3 x 1000 x 2^18 per 3 s window does. Only tsLoop moves the physical part on, once every "
                         f"{tick_ms} ms: look at the tsLoop lines of the run.")
        if value in (3 * per_value * 1000, 3 * (1 << LOGICAL_BITS) * 1000):
            return wrong("That is the design documents' count for a whole 3 s window, and it takes a new physical "
                         "value every millisecond. The question is per second; and only tsLoop moves the physical "
                         f"part on, once every {tick_ms} ms.")
        if value in (per_value, 1 << LOGICAL_BITS):
            return wrong(f"That is one physical value's worth. How many physical values does tsLoop hand out in "
                         f"one second, running every {tick_ms} ms?")
        if value in ((1 << (LOGICAL_BITS - 1)) * ticks, ((1 << (LOGICAL_BITS - 1)) + 1) * ticks):
            return wrong("The maxLogical/2 rule decides when tsLoop moves the physical part on; it does not stop "
                         "GenerateTSO, which can go on up to 2^18 - 1 on one physical value.")
        if value == 2 * 100_000 * ticks:
            return wrong("That is what client-1's batches of 100,000 got at best (two fit in one physical value). "
                         "The question is the TSO's own limit, whatever the batch size.")
        return wrong(f"{value:,} is not it. Multiply the timestamps one physical value gives by the number of "
                     "physical values tsLoop hands out per second.")

    return judge_integer(answer, "an int: timestamps per second", judge, timestamp=False)
