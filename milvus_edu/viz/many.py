"""Pictures of many runs: a metric against a parameter with percentile bands, how many seeds catch each switch,
and every check's verdicts as a heat map.

Each function takes the small result table of :mod:`milvus_edu.analysis.many` (a pandas DataFrame, or a Spark
DataFrame, which is collected: these tables have one row per grid point), draws on a new matplotlib Figure and
returns it; nothing is shown or saved, so a notebook displays it and a script may ``savefig`` it. Axes are
labelled with the unit the caller names.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

#: The colours of successive lines (matplotlib's default cycle, named so every picture agrees).
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _frame(table) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        return table
    if hasattr(table, "toPandas"):
        from ..analysis.frames import to_pandas

        return to_pandas(table)
    raise TypeError(f"expected a pandas or Spark DataFrame, got {type(table).__name__}")


def _need(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs the column(s) {', '.join(missing)}; the table has {', '.join(frame.columns)}")


def _value(value) -> str:
    if value == "":
        return "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _label(keys, names: Sequence[str]) -> str:
    keys = keys if isinstance(keys, tuple) else (keys,)
    return ", ".join(f"{n.removeprefix('opt_').removeprefix('param_')}={_value(k)}" for n, k in zip(names, keys))


def metric_vs_parameter(table, parameter: str, value: str, *, unit: str, parameter_unit: str = "",
                        lines: str | Sequence[str] = (), scale: float = 1.0, xlabel: str | None = None,
                        title: str | None = None):
    """A metric against a grid parameter: the median as a line, one line per value of ``lines``, and at each grid
    point the spread of the runs as a bar in the line's colour, thin from the minimum to p90 and thick from p90 to
    p99. The bars of the lines stand side by side around the grid point (shaded bands of several lines run into one
    another, and lines whose medians coincide would hide each other's spread).

    ``table``: :func:`~milvus_edu.analysis.many.by_dimensions`'s result for ``value`` (columns ``parameter``,
    ``p50_<value>``, ``p90_<value>``, ``p99_<value>``, ``min_<value>``, and the ``lines`` columns).
    ``unit``: the metric's unit (the y label); ``parameter_unit``: the parameter's unit after ``scale`` is
    applied to it (``scale=1e-6`` shows nanoseconds as ms); ``xlabel`` names the parameter in words (default: its
    column name without ``opt_`` / ``param_``), and the unit is added to it. Returns the Figure.
    """
    import matplotlib.pyplot as plt

    frame = _frame(table)
    lines = [lines] if isinstance(lines, str) else list(lines)
    cols = [f"p50_{value}", f"p90_{value}", f"p99_{value}", f"min_{value}"]
    _need(frame, [parameter, *lines, *cols], "metric_vs_parameter")
    fig, ax = plt.subplots(figsize=(7, 4))
    groups = list(frame.groupby(lines, sort=True)) if lines else [((), frame)]
    xs = frame[parameter].astype("float64") * scale
    dodge = (float(xs.max() - xs.min()) or 1.0) * 0.012  # the bars of neighbouring lines, this far apart
    for i, (keys, part) in enumerate(groups):
        part = part.sort_values(parameter)
        x = part[parameter].astype("float64") * scale
        color = COLORS[i % len(COLORS)]
        name = _label(keys, lines) if lines else value
        bar_x = x + (i - (len(groups) - 1) / 2) * dodge
        ax.vlines(bar_x, part[f"min_{value}"].astype("float64"), part[f"p90_{value}"].astype("float64"),
                  color=color, lw=1.2, alpha=0.8)
        ax.vlines(bar_x, part[f"p90_{value}"].astype("float64"), part[f"p99_{value}"].astype("float64"),
                  color=color, lw=4.0, alpha=0.8)
        ax.plot(x, part[f"p50_{value}"].astype("float64"), marker="o", ms=4, color=color, label=f"{name}: median")
    ax.plot([], [], color="0.4", lw=1.2, label="runs: min–p90")
    ax.plot([], [], color="0.4", lw=4.0, label="runs: p90–p99")
    shown = xlabel or parameter.removeprefix("opt_").removeprefix("param_")
    ax.set_xlabel(f"{shown} ({parameter_unit})" if parameter_unit else shown)
    ax.set_ylabel(f"{value} ({unit})")
    ax.set_title(title or f"{value}: median, and the runs' min–p90 (thin) and p90–p99 (thick) bars")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def detection_vs_seeds(table, *, lines: str | Sequence[str] = ("scenario", "switches"), title: str | None = None):
    """How many consecutive seeds it takes to catch each switch: :func:`~milvus_edu.analysis.many.detection_by_seeds`'s
    ``rate`` (as a percentage) against ``seeds``, one line per value of ``lines``. Returns the Figure."""
    import matplotlib.pyplot as plt

    frame = _frame(table)
    lines = [lines] if isinstance(lines, str) else list(lines)
    _need(frame, [*lines, "seeds", "rate"], "detection_vs_seeds")
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (keys, part) in enumerate(frame.groupby(lines, sort=True)):
        part = part.sort_values("seeds")
        ax.plot(part["seeds"], part["rate"].astype("float64") * 100, marker="o", color=COLORS[i % len(COLORS)],
                label=_label(keys, lines))
    ax.set_xlabel("consecutive seeds tried (runs)")
    ax.set_ylabel("windows where a checker failed (%)")
    ax.set_ylim(-3, 103)
    ax.set_title(title or "Chance that n seeds in a row catch the switch")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def verdict_heatmap(table, *, rows: str | Sequence[str] = "scenario", title: str | None = None):
    """:func:`~milvus_edu.analysis.many.verdict_matrix` as a heat map: one row per value of ``rows``, one column
    per check, the colour the share of runs in which the check failed (0–100 %), each cell annotated with
    ``failed/runs``, a ``v`` when it was vacuous in some run and a ``*`` when its failures are the scenario's
    gap. A check a row's runs never ran is left blank. Returns the Figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    frame = _frame(table)
    rows = [rows] if isinstance(rows, str) else list(rows)
    _need(frame, [*rows, "check", "runs", "failed", "vacuous", "expected", "share_failed"], "verdict_heatmap")
    frame = frame.assign(row_label=[_label(k, rows) if len(rows) > 1 else str(k[0])
                               for k in frame[rows].itertuples(index=False, name=None)])
    row_names = list(dict.fromkeys(frame.sort_values(rows)["row_label"]))
    checks = list(dict.fromkeys(frame.sort_values(["mechanism", "check"] if "mechanism" in frame else ["check"])["check"]))
    share = np.full((len(row_names), len(checks)), np.nan)
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(checks) + 3), max(2.5, 0.45 * len(row_names) + 1.8)))
    for r in frame.itertuples(index=False):
        i, j = row_names.index(r.row_label), checks.index(r.check)
        share[i, j] = float(r.share_failed) * 100
        note = f"{int(r.failed)}/{int(r.runs)}" + ("v" if int(r.vacuous) else "") + ("*" if bool(r.expected) else "")
        ax.text(j, i, note, ha="center", va="center", fontsize=7,
                color="white" if share[i, j] > 60 else "black")
    image = ax.imshow(np.ma.masked_invalid(share), cmap="Reds", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(checks)), checks, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(row_names)), row_names, fontsize=8)
    ax.set_xlabel("check")
    ax.set_ylabel(", ".join(rows))
    fig.colorbar(image, ax=ax, label="runs where the check failed (%)")
    ax.set_title(title or "failed/runs per check (v: vacuous in some run, *: the scenario's gap)", fontsize=10)
    fig.tight_layout()
    return fig
