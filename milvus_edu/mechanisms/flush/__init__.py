"""The flush mechanism: DataNode write buffers, syncs to Parquet binlogs, channel checkpoints, DataCoord's
segment meta, flush and recovery.

Components: :mod:`milvus_edu.datanode` (flowgraph, write buffer, sync manager, checkpoint updater),
:mod:`milvus_edu.datacoord`, :mod:`milvus_edu.storage` (binlog paths, object store); simulated nodes:
:mod:`milvus_edu.cluster.data`. This package holds the lesson: scenarios, kinds, checker
(:mod:`~milvus_edu.mechanisms.flush.check`), narration, summary, panel, lanes, Spark analyses and lab checks, and
registers them.
"""

from __future__ import annotations

from .check import FlushChecker
from ...registry import Mechanism, register
from . import panel, summary
from .kinds import KINDS
from .narrate import DESCRIBE
from .scenarios import SCENARIOS
from .trace import TRACE
from .why import ASKS, EXPLAINERS


def _lanes():
    from .lanes import flush_lanes

    return flush_lanes()


def _analyses():
    from .analysis import ANALYSES

    return dict(ANALYSES)


MECHANISM = register(Mechanism(
    name="flush",
    title="DataNode flush and checkpoint",
    kinds=KINDS,
    scenarios=SCENARIOS,
    checker=FlushChecker,
    summary=summary.FlushSummary,
    describe=DESCRIBE,
    key_events=summary.KeyEvents,
    report=summary.report,
    lanes=_lanes,
    panel=panel.FlushPanel,
    film_steps=panel.film_steps,
    marks=panel.MARKS,
    analyses=_analyses,
    trace=TRACE,
    explainers=EXPLAINERS,
    asks=ASKS,
))
