"""The query mechanism: guarantee-timestamp reads, the consistency levels, tsafe and MVCC on the QueryNode.

Components: :mod:`milvus_edu.proxy.guarantee_ts` (the proxy's read timestamps), :mod:`milvus_edu.client` (the SDK's
session cache), :mod:`milvus_edu.querynode` (pipeline, delegator, segcore MVCC); simulated nodes:
:mod:`milvus_edu.cluster.querynode`, the SDK client :mod:`milvus_edu.cluster.client`. This package holds the lesson: the scenarios,
kinds, checker (:mod:`~milvus_edu.mechanisms.query.check`), narration, summary, panel, lanes, Spark analyses and
lab checks, and registers them.
"""

from __future__ import annotations

from .check import QueryChecker
from ...registry import Demo, Mechanism, register
from . import demo, summary
from .kinds import KINDS
from .marks import MARKS
from .narrate import DESCRIBE
from .scenarios import SCENARIOS
from .trace import TRACE
from .why import ASKS, EXPLAINERS

def _lanes():
    from .lanes import query_lanes

    return query_lanes()


def _panel(frame):
    from .panel import QueryPanel

    return QueryPanel(frame)


def _film_steps(index):
    from .panel import film_steps

    return film_steps(index)


def _analyses():
    from .analysis import ANALYSES

    return dict(ANALYSES)


MECHANISM = register(Mechanism(
    name="query",
    title="QueryNode guarantee-timestamp reads",
    kinds=KINDS,
    scenarios=SCENARIOS,
    checker=QueryChecker,
    summary=summary.QuerySummary,
    describe=DESCRIBE,
    key_events=summary.KeyEvents,
    report=summary.report,
    lanes=_lanes,
    panel=_panel,
    film_steps=_film_steps,
    marks=MARKS,
    analyses=_analyses,
    explainers=EXPLAINERS,
    asks=ASKS,
    demo=Demo(scenario="seed-example", seed=1, intro=demo.INTRO, outro=demo.outro, lab="notebooks/04_guarantee_ts.ipynb",
              story=demo.story, pictures=demo.pictures, products=demo.PICTURES),
    trace=TRACE,
))
