"""Reading a run log's columns for a view: exact integers, strings, channel names, the run's wall-clock start.

Shared by every lesson's lanes and panel (``milvus_edu/mechanisms/<lesson>/lanes.py``, ``panel.py``): each reads the
log's own columns, vectorised, and never re-runs the model.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..events.schema import SIM_EPOCH_MS
from ..narrate import detail_dict


def natural(name) -> list:
    """Sort key that puts ``dml_2`` before ``dml_10``."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]


def short_channel(name) -> str:
    """``by-dev-rootcoord-dml_3`` -> ``dml_3``; a vchannel keeps its suffix (``dml_3_100v3``)."""
    text = str(name)
    m = re.search(r"(dml_\d+.*)$", text)
    return m.group(1) if m else text


def texts(frame: pd.DataFrame, name: str) -> np.ndarray:
    """Column ``name`` as an object array of ``str`` (``""`` for nulls)."""
    return frame[name].astype("string").fillna("").to_numpy(dtype=object)


def ints(frame: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Column ``name`` as exact ``int64`` values (0 for nulls) and the mask of non-null rows.

    Hybrid timestamps need all 64 bits: through ``float`` two messages one logical step apart would
    compare equal.
    """
    col = frame[name]
    valid = col.notna().to_numpy()
    if not valid.any():
        return np.zeros(len(col), dtype=np.int64), valid
    return col.astype("Int64").to_numpy(dtype=np.int64, na_value=0), valid


def base_ms(frame: pd.DataFrame) -> int:
    """Run start on the wall clock, for hybrid timestamps' physical parts: the first clock reading minus
    its simulated time, or :data:`~milvus_edu.events.SIM_EPOCH_MS` when no event carries a clock."""
    clocks = frame["clock_ms"]
    has = clocks.notna().to_numpy()
    if not has.any():
        return SIM_EPOCH_MS
    i = int(np.argmax(has))
    return int(clocks.iloc[i]) - int(round(float(frame["t_ms"].iloc[i])))


def time_ticks(frame: pd.DataFrame) -> pd.DataFrame:
    """Every time tick written to a pchannel: ``pos`` (row position), ``t_ms``, ``channel``, ``tick_ts``
    (``int64``) and ``min_from`` (the session whose report was the minimum, ``""`` when not recorded)."""
    kinds = frame["kind"].astype(str).to_numpy()
    mtype = texts(frame, "msg_type")
    tick, has_tick = ints(frame, "tick_ts")
    ts, _ = ints(frame, "ts")
    mask = (kinds == "mq.produce") & (mtype == "TimeTick")
    pos = np.flatnonzero(mask)
    details = frame["detail"].to_numpy(dtype=object, na_value=None)[pos]
    return pd.DataFrame({
        "pos": pos,
        "t_ms": frame["t_ms"].to_numpy(dtype=float, na_value=np.nan)[pos],
        "channel": texts(frame, "channel")[pos],
        "tick_ts": np.where(has_tick[pos], tick[pos], ts[pos]),
        "min_from": [str(detail_dict(d).get("min_from", "")) for d in details],
    })
