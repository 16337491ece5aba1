"""The metadata KV: etcd's role in Milvus.

Models the parts of etcd that Milvus's TSO and session code use: ``Load``/``Save``/``Remove`` of
``TxnKV`` (``internal/kv/etcd/etcd_kv.go``), a compare-and-put transaction
(``If(Version(key) == 0).Then(Put)``), and leases with a TTL and keep-alive
(``clientv3.Grant``/``KeepAlive``/``Revoke``), which ``internal/util/sessionutil`` uses for the
active/standby lock.

Two engines share one behaviour:

* :class:`MemoryKV` - a dict, for simulations and unit tests;
* :class:`SQLiteKV` - a file (stdlib ``sqlite3``), the durable embedded default, so a TSO window
  survives a process restart exactly as it survives one in etcd.

Simplification: leases expire lazily, when the KV is next touched at or after the expiry instant on
the injected clock; etcd expires them on its own timer. A reader cannot tell the difference because
every read goes through the same expiry check first.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class KVError(Exception):
    """A KV operation failed (etcd's RPC error)."""


class KeyNotFoundError(KVError):
    """``Load`` of a key that does not exist (``merr.ErrIoKeyNotFound``)."""


class LeaseNotFoundError(KVError):
    """Keep-alive or put with a lease that has expired or was revoked."""


NowNs = Callable[[], int]


class BaseKV(ABC):
    """The shared behaviour of every engine; subclasses provide the raw row operations.

    ``now_ns`` is the clock used for lease expiry (the KV server's clock).
    """

    def __init__(self, now_ns: NowNs | None = None):
        self._now_ns = now_ns or (lambda: 0)
        self._lock = threading.RLock()
        self._watchers: list[tuple[str, Callable[[str, str], None]]] = []

    def watch(self, prefix: str, callback: Callable[[str, str], None]) -> Callable[[], None]:
        """``Watch``: call ``callback(event, key)`` (``"put"`` or ``"delete"``) for keys under ``prefix``.

        Returns a function that cancels the watch. Callbacks run after the change is committed.
        """
        entry = (prefix, callback)
        self._watchers.append(entry)
        return lambda: self._watchers.remove(entry) if entry in self._watchers else None

    def _notify(self, event: str, keys) -> None:
        for key in keys:
            for prefix, callback in list(self._watchers):
                if key.startswith(prefix):
                    callback(event, key)

    # raw operations, implemented by each engine -------------------------------------------
    @abstractmethod
    def _get(self, key: str) -> tuple[bytes, int | None] | None:
        """The ``(value, lease)`` row at ``key``, or None."""

    @abstractmethod
    def _put(self, key: str, value: bytes, lease: int | None) -> None:
        """Write one row."""

    @abstractmethod
    def _delete(self, key: str) -> None:
        """Delete one row if present."""

    @abstractmethod
    def _keys(self, prefix: str) -> list[str]:
        """Keys starting with ``prefix``, sorted."""

    @abstractmethod
    def _lease_get(self, lease: int) -> int | None:
        """The lease's expiry instant, or None."""

    @abstractmethod
    def _lease_put(self, lease: int, expiry_ns: int) -> None:
        """Create or extend a lease."""

    @abstractmethod
    def _lease_delete(self, lease: int) -> list[str]:
        """Delete a lease and every key attached to it; return those keys."""

    @abstractmethod
    def _expired_leases(self, now_ns: int) -> list[int]:
        """Leases whose expiry is at or before ``now_ns``, sorted."""

    @abstractmethod
    def _next_lease_id(self) -> int:
        """A fresh lease id, never reused."""

    @contextmanager
    def _txn(self) -> Iterator[None]:
        with self._lock:
            yield

    # public API --------------------------------------------------------------------------
    def expire_leases(self) -> list[str]:
        """Drop every lease whose TTL has run out on the clock; return the keys that vanished."""
        with self._txn():
            gone: list[str] = []
            for lease in self._expired_leases(self._now_ns()):
                gone.extend(self._lease_delete(lease))
        self._notify("delete", sorted(gone))
        return sorted(gone)

    def load(self, key: str) -> bytes:
        """``Load``: the value of ``key``; :class:`KeyNotFoundError` when absent."""
        self.expire_leases()  # own committed transaction: an error below must not roll the expiry back
        with self._txn():
            row = self._get(key)
        if row is None:
            raise KeyNotFoundError(f"key not found: {key}")
        return row[0]

    def has(self, key: str) -> bool:
        """``Has``: whether ``key`` exists."""
        self.expire_leases()
        with self._txn():
            return self._get(key) is not None

    def save(self, key: str, value: bytes, lease: int | None = None) -> None:
        """``Save``: put ``value`` at ``key`` (optionally attached to a live lease)."""
        self.expire_leases()
        with self._txn():
            if lease is not None and self._lease_get(lease) is None:
                raise LeaseNotFoundError(f"lease {lease} not found")
            self._put(key, bytes(value), lease)
        self._notify("put", [key])

    def remove(self, key: str) -> None:
        """``Remove``: delete ``key``; removing an absent key is not an error (as etcd)."""
        with self._txn():
            existed = self._get(key) is not None
            self._delete(key)
        if existed:
            self._notify("delete", [key])

    def load_with_prefix(self, prefix: str) -> list[tuple[str, bytes]]:
        """``LoadWithPrefix``: ``(key, value)`` pairs in key order."""
        self.expire_leases()
        with self._txn():
            out = []
            for k in self._keys(prefix):
                row = self._get(k)
                if row is not None:
                    out.append((k, row[0]))
            return out

    def put_if_absent(self, key: str, value: bytes, lease: int | None = None) -> bool:
        """The etcd transaction ``If(Version(key) == 0).Then(Put(key, value, lease))``.

        Returns whether the put happened. This is how a coordinator claims the ACTIVE key.
        """
        self.expire_leases()
        with self._txn():
            if self._get(key) is not None:
                return False
            if lease is not None and self._lease_get(lease) is None:
                raise LeaseNotFoundError(f"lease {lease} not found")
            self._put(key, bytes(value), lease)
        self._notify("put", [key])
        return True

    def grant(self, ttl_ns: int) -> int:
        """``Grant``: a new lease that expires ``ttl_ns`` from now unless kept alive."""
        if ttl_ns <= 0:
            raise ValueError(f"lease TTL must be positive, got {ttl_ns} ns")
        with self._txn():
            lease = self._next_lease_id()
            self._lease_put(lease, self._now_ns() + ttl_ns)
            return lease

    def keep_alive(self, lease: int, ttl_ns: int) -> None:
        """``KeepAliveOnce``: push the lease's expiry to ``now + ttl``; fails if it already expired."""
        self.expire_leases()
        with self._txn():
            if self._lease_get(lease) is None:
                raise LeaseNotFoundError(f"lease {lease} expired or revoked")
            self._lease_put(lease, self._now_ns() + ttl_ns)

    def revoke(self, lease: int) -> list[str]:
        """``Revoke``: end the lease now; its keys are deleted. Returns those keys."""
        with self._txn():
            gone = sorted(self._lease_delete(lease))
        self._notify("delete", gone)
        return gone

    def lease_expiry_ns(self, lease: int) -> int | None:
        """When the lease expires on the KV's clock, or ``None`` when it no longer exists."""
        self.expire_leases()
        with self._txn():
            return self._lease_get(lease)

    def close(self) -> None:
        """Release resources (a no-op for the in-memory engine)."""


class MemoryKV(BaseKV):
    """An in-memory KV (dicts). Deterministic: keys are listed in sorted order."""

    def __init__(self, now_ns: NowNs | None = None):
        super().__init__(now_ns)
        self._rows: dict[str, tuple[bytes, int | None]] = {}
        self._leases: dict[int, int] = {}
        self._lease_seq = 0

    def _get(self, key):
        return self._rows.get(key)

    def _put(self, key, value, lease):
        self._rows[key] = (value, lease)

    def _delete(self, key):
        self._rows.pop(key, None)

    def _keys(self, prefix):
        return sorted(k for k in self._rows if k.startswith(prefix))

    def _lease_get(self, lease):
        return self._leases.get(lease)

    def _lease_put(self, lease, expiry_ns):
        self._leases[lease] = expiry_ns

    def _lease_delete(self, lease):
        self._leases.pop(lease, None)
        keys = [k for k, (_, l) in self._rows.items() if l == lease]
        for k in keys:
            del self._rows[k]
        return keys

    def _expired_leases(self, now_ns):
        return sorted(l for l, exp in self._leases.items() if exp <= now_ns)

    def _next_lease_id(self):
        self._lease_seq += 1
        return self._lease_seq


class SQLiteKV(BaseKV):
    """A KV kept in one SQLite file: the durable embedded default.

    Every public operation is one SQLite transaction (preceded by the lease-expiry sweep, committed on
    its own), so a crash never leaves half a change.
    The file is created if missing; an existing file that is not a milvus-edu KV is refused
    rather than altered.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, lease INTEGER)",
        "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY, expiry_ns INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    )

    def __init__(self, path: str | os.PathLike, now_ns: NowNs | None = None):
        super().__init__(now_ns)
        self.path = Path(path)
        # SQLite silently treats a 1-byte file as an empty database and would overwrite it: check the header.
        if self.path.is_file() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as fh:
                if fh.read(16) != b"SQLite format 3\x00":
                    raise KVError(f"{self.path} is not a SQLite database; choose another KV path")
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise KVError(f"{self.path} is not a SQLite database ({exc}); choose another KV path") from exc
        if tables and not {"kv", "lease", "meta"} <= tables:
            self._db.close()
            raise KVError(f"{self.path} is a SQLite file of another program; choose another KV path")
        for stmt in self._SCHEMA:
            self._db.execute(stmt)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', 'milvus-edu-kv/1')")
        self._depth = 0

    @contextmanager
    def _txn(self):
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    def _get(self, key):
        row = self._db.execute("SELECT value, lease FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else (bytes(row[0]), row[1])

    def _put(self, key, value, lease):
        self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (key, value, lease))

    def _delete(self, key):
        self._db.execute("DELETE FROM kv WHERE key = ?", (key,))

    def _keys(self, prefix):
        rows = self._db.execute("SELECT key FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key", (len(prefix), prefix))
        return [r[0] for r in rows]

    def _lease_get(self, lease):
        row = self._db.execute("SELECT expiry_ns FROM lease WHERE id = ?", (lease,)).fetchone()
        return None if row is None else row[0]

    def _lease_put(self, lease, expiry_ns):
        self._db.execute("INSERT OR REPLACE INTO lease VALUES (?, ?)", (lease, expiry_ns))

    def _lease_delete(self, lease):
        keys = [r[0] for r in self._db.execute("SELECT key FROM kv WHERE lease = ?", (lease,))]
        self._db.execute("DELETE FROM kv WHERE lease = ?", (lease,))
        self._db.execute("DELETE FROM lease WHERE id = ?", (lease,))
        return keys

    def _expired_leases(self, now_ns):
        return [r[0] for r in self._db.execute("SELECT id FROM lease WHERE expiry_ns <= ? ORDER BY id", (now_ns,))]

    def _next_lease_id(self):
        row = self._db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM lease").fetchone()
        seq = self._db.execute("SELECT value FROM meta WHERE name = 'lease_seq'").fetchone()
        nxt = max(row[0], int(seq[0]) + 1 if seq else 1)
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('lease_seq', ?)", (str(nxt),))
        return nxt

    def close(self) -> None:
        """Close the SQLite connection."""
        self._db.close()


class FaultyKV:
    """Wraps a KV and makes chosen operations fail, to model an etcd outage or a slow quorum.

    ``should_fail(op, key)`` is asked before every operation (``op`` is the method name); when it
    returns True the call raises :class:`KVError` and the wrapped KV is not touched.
    """

    _OPS = ("load", "has", "save", "remove", "load_with_prefix", "put_if_absent", "grant", "keep_alive", "revoke")

    def __init__(self, inner: BaseKV, should_fail: Callable[[str, str], bool]):
        self.inner = inner
        self.should_fail = should_fail

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name not in self._OPS:
            return attr

        def call(*args, **kwargs):
            key = str(args[0]) if args else ""
            if self.should_fail(name, key):
                raise KVError(f"etcd unavailable: {name} {key}".rstrip())
            return attr(*args, **kwargs)

        return call


def uint64_to_bytes_big_endian(value: int) -> bytes:
    """``typeutil.Uint64ToBytesBigEndian``."""
    return int(value).to_bytes(8, "big", signed=False)


def bytes_to_uint64_big_endian(data: bytes) -> int:
    """``typeutil.BigEndianBytesToUint64``; exactly 8 bytes are required (``ValueError`` with Go's text otherwise)."""
    if len(data) != 8:
        raise ValueError(f"failed to convert []byte to uint64: invalid data, must 8 bytes, but {len(data)}")
    return int.from_bytes(data, "big", signed=False)


class RootedKV:
    """A KV view whose keys live under ``root`` (``etcdkv.NewEtcdKV(client, rootPath)``).

    ``tsoutil.NewTSOKVBase(client, "by-dev/kv", "gid")`` is ``RootedKV(kv, "by-dev/kv/gid")``, so the
    TSO's key ``timestamp`` is stored at ``by-dev/kv/gid/timestamp``.
    """

    def __init__(self, inner, root: str):
        self.inner = inner
        self.root = root.rstrip("/")

    def _k(self, key: str) -> str:
        return f"{self.root}/{key}"

    def load(self, key: str) -> bytes:
        """``Load`` under the root."""
        return self.inner.load(self._k(key))

    def save(self, key: str, value: bytes) -> None:
        """``Save`` under the root."""
        self.inner.save(self._k(key), value)

    def remove(self, key: str) -> None:
        """``Remove`` under the root."""
        self.inner.remove(self._k(key))

    def has(self, key: str) -> bool:
        """``Has`` under the root."""
        return self.inner.has(self._k(key))
