"""Self-checks for ``notebooks/05_at_scale.ipynb`` (see :mod:`milvus_edu.labs.feedback`).

Every check judges the answer against the table the notebook's sweep produced (a pandas DataFrame from
:mod:`milvus_edu.analysis.many`), never against a number written into this file, so it stays right when a
student scales the sweep up or changes its seeds.
"""

from __future__ import annotations

import math
import numbers

import pandas as pd

from ..narrate import plural
from .feedback import Feedback, is_time, judge_integer, name_answer, pending, right, shown, wrong

DRIVERS = ("interval", "proxies")
#: An answer naming the tick interval (``interval``, ``time tick``, ``tick-interval``, the parameter's column) or
#: the proxy count (``proxies``, ``proxy count``, ``opt_proxies``), once normalised by :func:`name_answer`.
_INTERVAL_HINTS = ("interval", "tick")
_PROXY_HINTS = ("prox",)


def _spread(table: pd.DataFrame, across: str, within: str, value: str) -> float:
    """The mean, over the values of ``within``, of the range (max - min) of ``value`` across ``across``."""
    ranges = table.groupby(within)[value].agg(lambda s: float(s.max()) - float(s.min()))
    return float(ranges.mean())


# ---- Exercise 1 ---------------------------------------------------------------------------------
def check_wait_driver(answer, table: pd.DataFrame, value: str = "p50_max_wait_ms",
                      interval: str = "param_timetick_time_tick_interval_ns", proxies: str = "opt_proxies") -> Feedback:
    """Exercise: which grid dimension moves the Strong wait more, the tick interval or the number of proxies
    (``'interval'`` or ``'proxies'``), judged on the sweep's table (one row per grid point)."""
    a, verdict = name_answer(answer, DRIVERS)
    if verdict is not None:
        return verdict
    by_interval = _spread(table, interval, proxies, value)
    by_proxies = _spread(table, proxies, interval, value)
    driver = "interval" if by_interval > by_proxies else "proxies"
    said = ("interval" if any(h in a for h in _INTERVAL_HINTS)
            else "proxies" if any(h in a for h in _PROXY_HINTS) else None)
    if said is None:
        return wrong(f"{shown(answer)} is neither; answer 'interval' (the time-tick interval) or 'proxies' (how many).")
    facts = (f"across the tick intervals `{value}` moves by {by_interval:.0f} ms on average, across the proxy counts "
             f"by {by_proxies:.0f} ms")
    if said == driver == "interval":
        return right(f"Right: {facts}. A Strong read waits until tsafe passes its guarantee, and tsafe only moves "
                     "when a time tick arrives, so the wait is set by how often ticks are written.")
    if said == driver:
        return right(f"Right for this sweep: {facts}.")
    return wrong(f"Look at the table again: {facts}. Which one changes the wait more?")


# ---- Exercise 2 ---------------------------------------------------------------------------------
def check_seeds_to_catch(answer, table: pd.DataFrame, inserts_per_s: float, target: float = 0.9) -> Feedback:
    """Exercise: the fewest consecutive seeds whose windows catch the switch at ``inserts_per_s`` with a rate of at
    least ``target``, read from :func:`~milvus_edu.analysis.many.detection_by_seeds`'s table."""
    rows = table[(table["switches"] != "") & (table["opt_inserts_per_s"].astype(float) == float(inserts_per_s))]
    enough = rows[rows["rate"].astype(float) >= target]
    if rows.empty:
        return wrong(f"the table has no row with the switch at {inserts_per_s:g} inserts/s; run the sweep cell again.")
    if enough.empty:
        if answer is None:
            return pending("an int: a number of seeds")
        return wrong(f"In this sweep no number of seeds up to {int(rows['seeds'].max())} reaches "
                     f"{target:.0%}: sweep more seeds (the grid's \"seeds\") and look again.")
    need = int(enough["seeds"].min())
    rate_1 = float(rows.loc[rows["seeds"] == rows["seeds"].min(), "rate"].iloc[0])

    def judge(n: int) -> Feedback:
        if n == need:
            return right(f"Right: with {need} seeds in a row at least {target:.0%} of the windows caught the switch, "
                         f"while one seed catches it {rate_1:.0%} of the time. A checker that passes on a few seeds "
                         "has not shown the rule is safe.")
        if n < need:
            got = rows.loc[rows["seeds"] == n, "rate"]
            shown = f"{float(got.iloc[0]):.0%}" if len(got) else "not in the table"
            return wrong(f"With {plural(n, 'seed')} the rate is {shown}, below {target:.0%}. Look further down the `rate` column.")
        return wrong(f"{n} seeds are enough, but fewer are too: find the smallest `seeds` whose `rate` is at least "
                     f"{target}.")

    return judge_integer(answer, "an int: a number of seeds", judge, timestamp=False)


# ---- Exercise 3 ---------------------------------------------------------------------------------
def check_latency_growth(answer, table: pd.DataFrame, low: float, high: float, value: str = "p50_latency_ms",
                         rate: str = "opt_rpc_failure_rate") -> Feedback:
    """Exercise: how many ms longer ``value`` (the median flush latency) is at failure rate ``high`` than at ``low``,
    to the nearest ms, read from :func:`~milvus_edu.analysis.many.by_dimensions`'s table."""
    if answer is None:
        return pending("a number of milliseconds")
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real) or is_time(answer):
        if isinstance(answer, (pd.Series, pd.DataFrame)):
            return wrong("That is a pandas object, not one number; pick one value with `.iloc[0]` and subtract.")
        return wrong(f"Got a value of type {type(answer).__name__}; give a number of milliseconds, as an int or a "
                     "float.")
    at = table.set_index(table[rate].astype(float))[value]
    if float(low) not in at.index or float(high) not in at.index:
        return wrong(f"the table has no row at {rate} {low:g} or {high:g}; run the sweep cell again.")
    growth = float(at[float(high)]) - float(at[float(low)])
    try:
        given = float(answer)
    except OverflowError:  # an int too large for a float
        return wrong(f"That is {shown(answer)}, far beyond any latency in the table; give a number of milliseconds.")
    if not math.isfinite(given):
        return wrong(f"`{shown(answer)}` is not a finite number of milliseconds.")
    if abs(given - growth) <= 1.0:
        return right(f"Right: {growth:.0f} ms. A failed SaveBinlogPaths is retried and a failed checkpoint update "
                     "waits for the updater's next tick, while GetFlushState says flushed only once every channel's "
                     "checkpoint has reached the flush's timestamp: each failure on that path adds to the wait.")
    if abs(given + growth) <= 1.0:
        return wrong("The sign is reversed: subtract the latency at the low rate from the one at the high rate.")
    if abs(given - growth / 1000) <= 0.01:
        return wrong("That is in seconds; the table's latency_ms is in milliseconds.")
    # the growth of another statistic of the same table (the mean, the maximum ...): name the column asked for
    suffix = value.split("_", 1)[-1]
    for column in table.columns:
        if column != value and column.endswith("_" + suffix):
            other = table.set_index(table[rate].astype(float))[column]
            if float(low) in other.index and float(high) in other.index and \
                    abs(given - (float(other[float(high)]) - float(other[float(low)]))) <= 1.0:
                return wrong(f"That is how much `{column}` grew; the exercise asks about `{value}`.")
    return wrong(f"Not quite. Take `{value}` at {rate} = {high:g} and subtract the one at {low:g}.")

