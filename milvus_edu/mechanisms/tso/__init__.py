"""The TSO mechanism: Milvus's timestamp oracle, rootcoord's AllocTimestamp and active/standby sessions.

Components: :mod:`milvus_edu.tso`, :mod:`milvus_edu.rootcoord`, :mod:`milvus_edu.sessionutil`;
simulated nodes: :mod:`milvus_edu.cluster.rootcoord`. This package holds the lesson: kinds, scenarios, checker
(:mod:`~milvus_edu.mechanisms.tso.check`), narration, summary, panel, lanes, Spark analyses
(:mod:`~milvus_edu.mechanisms.tso.analysis`) and lab checks (:mod:`~milvus_edu.mechanisms.tso.labs`), and
registers it all.
"""

from __future__ import annotations

from .check import TSOChecker
from ...registry import Mechanism, register
from . import panel, summary
from .kinds import KINDS
from .narrate import DESCRIBE
from .scenarios import SCENARIOS
from .trace import TRACE
from .why import EXPLAINERS


def _lanes():
    from .lanes import tso_lanes

    return tso_lanes()


def _analyses():
    from . import analysis

    return {
        "allocations_per_window": (analysis.allocations_per_window, analysis.allocations_per_window_pd),
        "kv_saves_per_second": (analysis.kv_saves_per_second, analysis.kv_saves_per_second_pd),
        "failover_gaps": (analysis.failover_gaps, analysis.failover_gaps_pd),
    }


MECHANISM = register(Mechanism(
    name="tso",
    title="Timestamp oracle (TSO)",
    kinds=KINDS,
    scenarios=SCENARIOS,
    checker=TSOChecker,
    summary=summary.TSOSummary,
    describe=DESCRIBE,
    key_events=summary.KeyEvents,
    report=summary.report,
    lanes=_lanes,
    panel=panel.TSOPanel,
    film_steps=panel.film_steps,
    marks=panel.MARKS,
    analyses=_analyses,
    trace=TRACE,
    explainers=EXPLAINERS,
))
