"""The query mechanism: guarantee-timestamp reads, the consistency levels, tsafe and MVCC on the QueryNode.

Components: :mod:`milvus_edu.proxy.guarantee_ts` (the proxy's read timestamps), :mod:`milvus_edu.client` (the SDK's
session cache), :mod:`milvus_edu.querynode` (pipeline, delegator, segcore MVCC); checker:
:mod:`milvus_edu.check.query`. This package holds the simulated nodes, the cluster with its clients, the scenarios,
kinds, narration and summary, and registers them.
"""

from __future__ import annotations

from ...check.query import QueryChecker
from ...registry import Mechanism, register
from . import summary
from .kinds import KINDS
from .narrate import DESCRIBE
from .scenarios import SCENARIOS

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
))
