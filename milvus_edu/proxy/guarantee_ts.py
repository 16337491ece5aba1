"""The proxy's read path: which timestamp a search or query starts at, and which it must wait for.

Models ``internal/proxy/util.go`` (``parseGuaranteeTsFromConsistency``, ``parseGuaranteeTs``, ``strongTS``,
``boundedTS``), ``internal/proxy/task_query.go`` / ``task_search.go`` (``CanSkipAllocTimestamp`` and the guarantee
selection in ``PreExecute``) and the begin-timestamp choice of ``task_scheduler.go`` (``processTask``: a task that
may skip the TSO takes ``ComposeTS(time.Now().UnixMilli(), 0)`` from the proxy's own clock).

The consequence the lesson needs: only Strong reads ask the TSO. A Bounded read's guarantee is the proxy's *local*
clock minus ``common.gracefulTime`` (5,000 ms), so a proxy whose clock runs behind asks for older data than it
should (Milvus issue #16841). Times are injected: the caller passes the proxy's clock reading and, for Strong, the
TSO's answer.

Simplification: iterators are modelled only through ``is_iterator`` (their supplied guarantee becomes the MVCC
timestamp too); the collection TTL and the access log are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..proto import ConsistencyLevel
from ..tsoutil import NS_PER_MS, add_physical_duration_on_ts, compose_ts

#: ``strongTS`` / ``boundedTS``: the legacy guarantee values old SDKs send with level Strong.
STRONG_TS = 0
BOUNDED_TS = 2
#: ``common.gracefulTime`` (ms): how stale a Bounded read may be.
GRACEFUL_TIME_MS = 5000


def parse_guarantee_ts_from_consistency(ts: int, t_max: int, level, graceful_time_ms: int = GRACEFUL_TIME_MS) -> int:
    """``parseGuaranteeTsFromConsistency``: Strong waits for ``t_max`` (the task's begin ts), Bounded for ``t_max``
    minus the graceful time (physical part only, the logical part kept), Eventually for 1 (nothing); Session and
    Customized keep ``ts``, the value the SDK supplied."""
    level = ConsistencyLevel.parse(level)
    if level == ConsistencyLevel.STRONG:
        return t_max
    if level == ConsistencyLevel.BOUNDED:
        return add_physical_duration_on_ts(t_max, -graceful_time_ms * NS_PER_MS)
    if level == ConsistencyLevel.EVENTUALLY:
        return 1
    return ts


def parse_guarantee_ts(ts: int, t_max: int, graceful_time_ms: int = GRACEFUL_TIME_MS) -> int:
    """``parseGuaranteeTs`` (the legacy rule for level Strong with a supplied guarantee): ``strongTS`` (0) means
    ``t_max``, ``boundedTS`` (2) means ``t_max`` minus the graceful time, any other value is kept."""
    if ts == STRONG_TS:
        return t_max
    if ts == BOUNDED_TS:
        return add_physical_duration_on_ts(t_max, -graceful_time_ms * NS_PER_MS)
    return ts


@dataclass(frozen=True)
class ReadRequest:
    """What a ``SearchRequest`` / ``QueryRequest`` carries about consistency.

    ``consistency_level``: the level the request names (pymilvus sends Strong, 0, when the user gave none and
    sets ``use_default_consistency``); ``guarantee_timestamp``: what the SDK computed
    (:func:`milvus_edu.client.construct_guarantee_ts`); ``is_iterator``: a query/search iterator's page.
    """

    consistency_level: ConsistencyLevel = ConsistencyLevel.STRONG
    guarantee_timestamp: int = 0
    use_default_consistency: bool = False
    is_iterator: bool = False


def can_skip_alloc_timestamp(req: ReadRequest, collection_level) -> bool:
    """``queryTask.CanSkipAllocTimestamp`` (search is the same): a read may take its begin ts from the proxy's
    clock unless its effective level is Strong; a legacy request (level Strong with a guarantee > 0) may too."""
    if not req.use_default_consistency:
        if req.consistency_level == ConsistencyLevel.STRONG and req.guarantee_timestamp > 0:
            return True
        level = req.consistency_level
    else:
        level = ConsistencyLevel.parse(collection_level)
    return level != ConsistencyLevel.STRONG


@dataclass(frozen=True)
class ReadTimestamps:
    """The timestamps a read task settled on in ``PreExecute``.

    ``begin_ts``: the task's timestamp; ``from_tso``: whether the TSO gave it (else the proxy's clock);
    ``level``: the level actually applied; ``guarantee_ts``: what the QueryNode must have consumed before it
    reads; ``mvcc_ts``: the read timestamp fixed by the proxy (an iterator's), 0 when the QueryNode picks it.
    """

    begin_ts: int
    from_tso: bool
    level: ConsistencyLevel
    guarantee_ts: int
    mvcc_ts: int = 0


def read_timestamps(req: ReadRequest, collection_level, proxy_now_ms: int, tso_ts: int | None = None,
                    graceful_time_ms: int = GRACEFUL_TIME_MS) -> ReadTimestamps:
    """``processTask`` then ``PreExecute`` of a query or search: the begin ts, then the guarantee.

    ``proxy_now_ms``: the proxy's clock (Unix ms) — used when :func:`can_skip_alloc_timestamp`; ``tso_ts``: the
    TSO's answer, needed otherwise (``ValueError`` when missing). With ``use_default_consistency`` the
    collection's level applies; else a request at level Strong with a guarantee > 0 follows the legacy rule
    (:func:`parse_guarantee_ts`), any other the consistency rule. An iterator's supplied guarantee is used as is,
    for both the guarantee and the MVCC timestamp.
    """
    skip = can_skip_alloc_timestamp(req, collection_level)
    if skip:
        begin = compose_ts(proxy_now_ms, 0)
    elif tso_ts is None:
        raise ValueError("this read is Strong, so its begin timestamp comes from the TSO: pass tso_ts")
    else:
        begin = tso_ts
    guarantee = req.guarantee_timestamp
    if req.use_default_consistency:
        level = ConsistencyLevel.parse(collection_level)
        guarantee = parse_guarantee_ts_from_consistency(guarantee, begin, level, graceful_time_ms)
    else:
        level = req.consistency_level
        if level == ConsistencyLevel.STRONG and guarantee > 0:
            guarantee = parse_guarantee_ts(guarantee, begin, graceful_time_ms)
        else:
            guarantee = parse_guarantee_ts_from_consistency(guarantee, begin, level, graceful_time_ms)
    mvcc = 0
    if req.is_iterator and req.guarantee_timestamp > 0:
        guarantee = mvcc = req.guarantee_timestamp
    return ReadTimestamps(begin, not skip, level, guarantee, mvcc)
