"""Self-checks for ``notebooks/01_tso.ipynb``.

Every ``check_*`` function returns a :class:`Feedback` that prints as one friendly paragraph and is
truthy only when the answer is right, so a notebook cell can both show it and ``assert`` it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..narrate import ts_text
from ..tsoutil import LOGICAL_BITS, compose_ts, parse_hybrid_ts


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer."""

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return ("✅ " if self.ok else "❌ ") + self.message

    def _repr_markdown_(self) -> str:
        return str(self)


def check_compose(answer, physical_ms: int, logical: int) -> Feedback:
    """Exercise: the hybrid ts of ``(physical_ms, logical)``."""
    want = compose_ts(physical_ms, logical)
    if not isinstance(answer, int):
        return Feedback(False, f"Expected an int, got {type(answer).__name__}. Hybrid timestamps are 64-bit integers.")
    if answer == want:
        return Feedback(True, f"Right: ({physical_ms} << 18) + {logical} = {want}.")
    if answer == (physical_ms << 16) + logical or answer == (physical_ms << 20) + logical:
        return Feedback(False, f"Check the shift: the logical part has {LOGICAL_BITS} bits.")
    if answer == physical_ms * 1000 + logical:
        return Feedback(False, "The physical part is shifted left by 18 bits, not multiplied by 1000.")
    p, l = parse_hybrid_ts(answer)
    return Feedback(False, f"Your number decodes to physical {p}, logical {l}; it should decode to "
                           f"physical {physical_ms}, logical {logical}.")


def check_first_after_failover(answer, events: pd.DataFrame) -> Feedback:
    """Exercise: the first timestamp the new active rootcoord handed out."""
    allocs = events[(events["kind"] == "rootcoord.alloc_timestamp") & events["error"].isna()]
    actives = events[events["kind"] == "session.active"]
    if len(actives) < 2:
        return Feedback(False, "This run has no failover; use the tso-failover scenario.")
    new = actives["node"].iloc[1]
    mine = allocs[allocs["node"] == new]
    want = int(mine["ts"].iloc[0])
    old = allocs[allocs["node"] != new]
    old_last = int(old["ts"].iloc[-1] + old["count"].iloc[-1] - 1)
    if answer == want:
        return Feedback(True, f"Right: {new} started at {ts_text(want)}, above {ts_text(old_last)}, the "
                              f"last one before the crash.")
    if answer == old_last or answer in set(int(x) for x in old["ts"]):
        return Feedback(False, f"That timestamp came from the old active. Filter rootcoord.alloc_timestamp "
                               f"events whose node is {new}.")
    if isinstance(answer, int) and answer > want and answer in set(int(x) for x in mine["ts"]):
        return Feedback(False, f"That is one of {new}'s, but not its first; take the earliest by seq.")
    return Feedback(False, f"Not a timestamp {new} handed out. Look at events of kind "
                           f"rootcoord.alloc_timestamp from {new}, column ts.")


def check_max_per_tick(answer) -> Feedback:
    """Exercise: the most timestamps one window start can give before tsLoop moves it on."""
    want = (1 << LOGICAL_BITS) - 1
    if answer == want:
        return Feedback(True, "Right: logical values 1 .. 2^18-1. GenerateTSO adds before it returns, so logical "
                              "0 is never handed out, and 2^18 is rejected while LimitMaxLogic is on.")
    if answer == 1 << LOGICAL_BITS:
        return Feedback(False, "Close. Which logical value does the very first allocation on a new physical "
                               "get? GenerateTSO adds the count first, then returns.")
    if isinstance(answer, int) and answer in (50 * (1 << LOGICAL_BITS), 50 * want):
        return Feedback(False, "The physical part does not advance every millisecond by itself: only tsLoop "
                               "moves it, every 50 ms. Count the logical values of ONE window start.")
    return Feedback(False, "Think of the 18 logical bits of one physical value, and of where logical starts.")


def check_broken_invariant(answer: str) -> Feedback:
    """Exercise: which checker catches ``tso_skip_load_on_init`` in tso-failover."""
    a = str(answer).strip().lower()
    if a == "global-monotonic":
        return Feedback(True, "Right: the new active starts at its own clock, 75 s behind, so its first "
                              "timestamps are below those already handed out.")
    if a == "window":
        return Feedback(False, "The window invariant holds: the new active still saves a window ahead of its "
                               "own physical part. What goes wrong is the order across the two leaders.")
    if a == "client-monotonic":
        return Feedback(False, "That one breaks too (each client sees time go back), but the root invariant "
                               "is about every timestamp handed out by any rootcoord.")
    return Feedback(False, "Answer with an invariant name: global-monotonic, client-monotonic or window.")
