"""The SDK's collection cache and its retry on a schema error.

Models the Go SDK in Milvus's repository (``client/milvusclient/common.go``: ``CollectionCache`` with
``GetCollection`` and ``Evict``, ``Client.retryIfSchemaError``; ``write.go``: ``Insert`` and ``Delete`` run through
it) and the loop it runs in, ``pkg/util/retry.Handle`` (10 attempts, 200 ms first sleep doubling up to 3 s). The
design documents' DDL/DML section quotes ``retryIfSchemaError`` (book/seeds.md).

The SDK describes a collection once and keeps the answer; every insert carries the cached ``UpdateTimestamp`` as
its schema timestamp. When the proxy answers ``collection schema mismatch`` (the collection was altered, or dropped
and created again under its name), the SDK evicts its entry and tries again, describing anew, unless the failed
attempt already used the same schema timestamp as the attempt before it (then describing again would not help, and
the error goes to the caller). Any other error, ``collection not found`` included, is returned at once.

Simplification: one cache per simulated client; the ``singleflight`` that merges concurrent describes is not
modelled; the retry's context has no deadline (``retry.Handle`` also stops when the context ends).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..merr import CollectionSchemaMismatchError

MAX_UINT64 = 2**64 - 1  # math.MaxUint64: the "no schema timestamp yet" value of a failed getCollection
RETRY_ATTEMPTS = 10  # retry.newDefaultConfig: attempts
RETRY_SLEEP_MS = 200.0  # retry.newDefaultConfig: sleep (doubled after each retry)
RETRY_MAX_SLEEP_MS = 3000.0  # retry.newDefaultConfig: maxSleepTime


class CollectionCache:
    """``CollectionCache``: collection name -> what the SDK's ``DescribeCollection`` returned."""

    def __init__(self) -> None:
        self._collections: dict[str, object] = {}

    def get(self, name: str):
        """The cached description of ``name``, or None (then the SDK describes it and calls :meth:`insert`)."""
        return self._collections.get(name)

    def insert(self, name: str, description) -> None:
        """Keep ``description`` for ``name`` (``collections.Insert`` after a successful fetch)."""
        self._collections[name] = description

    def evict(self, name: str) -> bool:
        """``Evict``: forget ``name``; returns whether it was cached."""
        return self._collections.pop(name, None) is not None


@dataclass(frozen=True)
class RetryDecision:
    """What ``retryIfSchemaError`` and ``retry.Handle`` do after a failed attempt: ``retry`` (after ``sleep_ms``)
    or return the error; ``evict`` the collection from the SDK's cache first."""

    retry: bool
    evict: bool
    sleep_ms: float


class SchemaErrorRetry:
    """One call's ``retryIfSchemaError`` inside ``retry.Handle``: feed each failed attempt to :meth:`after`."""

    def __init__(self, attempts: int = RETRY_ATTEMPTS, sleep_ms: float = RETRY_SLEEP_MS,
                 max_sleep_ms: float = RETRY_MAX_SLEEP_MS):
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}; retry.Handle's default is 10")
        self.attempts = attempts
        self.sleep_ms = sleep_ms
        self.max_sleep_ms = max_sleep_ms
        self.tried = 0
        self._last_ts = MAX_UINT64

    def after(self, schema_ts: int, error: BaseException) -> RetryDecision:
        """The attempt that used schema timestamp ``schema_ts`` failed with ``error``.

        A schema mismatch with a timestamp other than the previous attempt's evicts and retries (after the last of
        ``attempts`` it evicts, sleeps and returns the error, as ``retry.Handle`` does); the same timestamp twice, or
        any other error, returns the error at once.
        """
        self.tried += 1
        if not isinstance(error, CollectionSchemaMismatchError):
            return RetryDecision(False, False, 0.0)
        same = schema_ts == self._last_ts
        self._last_ts = schema_ts
        if same:
            return RetryDecision(False, False, 0.0)
        sleep = self.sleep_ms
        self.sleep_ms = min(self.sleep_ms * 2, self.max_sleep_ms)
        # retry.Handle sleeps after the last attempt too, then returns its error
        return RetryDecision(self.tried < self.attempts, True, sleep)
