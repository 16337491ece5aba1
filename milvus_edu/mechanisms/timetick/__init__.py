"""The TimeTick mechanism: proxies' pchannel statistics and reports, rootcoord's timetick sync, time tick
messages in pchannels, and tt-aligned consumption through dispatchers.

Components: :mod:`milvus_edu.proxy`, :mod:`milvus_edu.rootcoord` (``timeticksync``, DDL minimum),
:mod:`milvus_edu.mq`; simulated nodes: :mod:`milvus_edu.cluster.dml`. This package holds the lesson: scenarios,
kinds, checker (:mod:`~milvus_edu.mechanisms.timetick.check`), narration, summary, panel, lanes, Spark analyses and
lab checks, and registers them.
"""

from __future__ import annotations

from .check import TimeTickChecker
from ...registry import Mechanism, register
from . import panel, summary
from .kinds import KINDS
from .narrate import DESCRIBE
from .scenarios import SCENARIOS
from .trace import TRACE
from .why import EXPLAINERS

def _lanes():
    from .lanes import timetick_lanes

    return timetick_lanes()


def _analyses():
    from .analysis import ANALYSES

    return dict(ANALYSES)


MECHANISM = register(Mechanism(
    name="timetick",
    title="TimeTick and message streams",
    kinds=KINDS,
    scenarios=SCENARIOS,
    checker=TimeTickChecker,
    summary=summary.TimeTickSummary,
    describe=DESCRIBE,
    key_events=summary.KeyEvents,
    report=summary.report,
    lanes=_lanes,
    panel=panel.TimeTickPanel,
    film_steps=panel.film_steps,
    marks=panel.MARKS,
    analyses=_analyses,
    trace=TRACE,
    explainers=EXPLAINERS,
))
