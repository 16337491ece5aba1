"""The guarantee timestamp pymilvus sends with a search or query, and the session cache behind Session reads.

Models pymilvus ``pymilvus/client/ts_utils.py`` (``construct_guarantee_ts``, ``update_collection_ts``),
``cache.py`` (``CollectionTsCache``: the largest write timestamp per collection) and ``constants.py``
(``EVENTUALLY_TS = 1``, ``BOUNDED_TS = 2``), as the reference's §5.2 states them.

After every insert, upsert or delete the SDK keeps the mutation's timestamp for its collection, the largest
seen. A Session read sends that value as its guarantee, so the QueryNode waits until it has consumed the
client's own last write ("read your writes"); a collection the client never wrote gets 1 (nothing to wait for).
Strong sends 0 and lets the proxy take a fresh timestamp from the TSO; Bounded sends 2, the legacy "bounded"
marker; Eventually sends 1.

Simplification: one cache per client object (pymilvus keeps one per process, keyed by endpoint); iterators are
not modelled here.
"""

from __future__ import annotations

from ..proto import ConsistencyLevel

#: ``EVENTUALLY_TS``: a guarantee every QueryNode has already passed.
EVENTUALLY_TS = 1
#: ``BOUNDED_TS``: the legacy marker the proxy turns into "now minus gracefulTime".
BOUNDED_TS = 2


class CollectionTsCache:
    """``CollectionTsCache``: the last write timestamp per ``(endpoint, db, collection)``, never lowered."""

    def __init__(self) -> None:
        self._ts: dict[tuple[str, str, str], int] = {}

    @staticmethod
    def _key(endpoint: str, db_name: str, collection: str) -> tuple[str, str, str]:
        return endpoint, db_name or "default", collection

    def set(self, endpoint: str, db_name: str, collection: str, ts: int) -> None:
        """``set``: remember ``ts`` only if it is larger than the one kept (mutations may return out of order)."""
        key = self._key(endpoint, db_name, collection)
        if ts > self._ts.get(key, 0):
            self._ts[key] = ts

    def get(self, endpoint: str, db_name: str, collection: str) -> int:
        """``get``: the kept timestamp, 0 when the collection was never written through this cache."""
        return self._ts.get(self._key(endpoint, db_name, collection), 0)


def construct_guarantee_ts(level, cached_ts: int, given_ts: int | None = None,
                           session_uses_zero_ts: bool = False) -> tuple[ConsistencyLevel | None, int]:
    """``construct_guarantee_ts``: ``(level sent, guarantee_timestamp sent)`` for a read.

    ``level``: the level the user gave, or ``None`` for "the collection's default" (the request then says
    ``use_default_consistency`` and carries the session value, as pymilvus does); ``cached_ts``: the collection's
    last write timestamp from :class:`CollectionTsCache` (0 when none); ``given_ts``: a user-supplied
    ``guarantee_timestamp`` (Eventually and Customized keep it).

    Bug switch ``session_uses_zero_ts``: Session sends 0 instead of the cached write timestamp. The proxy keeps a
    Session guarantee as it is, so the QueryNode's ``waitTSafe(0)`` returns at once and the read may miss the
    client's own acknowledged write; the Session checker ("a Session read sees the client's own writes") reports it.
    """
    session = cached_ts or EVENTUALLY_TS
    if level is None:
        return None, session
    level = ConsistencyLevel.parse(level)
    if level == ConsistencyLevel.STRONG:
        return level, 0
    if level == ConsistencyLevel.SESSION:
        return level, 0 if session_uses_zero_ts else session
    if level == ConsistencyLevel.BOUNDED:
        return level, BOUNDED_TS
    return level, given_ts or EVENTUALLY_TS
