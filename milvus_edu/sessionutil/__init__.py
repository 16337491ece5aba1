"""Coordinator sessions and the active/standby lock (``internal/util/sessionutil/session_util.go``).

A coordinator registers a session with an etcd lease (TTL ``common.session.ttl``, 60 s in 2.5) and
keeps it alive every TTL/3. With active/standby enabled it then calls ``ProcessActiveStandBy``: an
etcd transaction puts ``by-dev/meta/session/rootcoord`` *only if the key does not exist*, attached to
its lease. The winner is ACTIVE; a loser watches the key and tries again when it is deleted — which
happens when the active's lease expires (it crashed and stopped keeping it alive) or is revoked (a
graceful stop).

Simplification: ``ProcessActiveStandBy`` blocks in Go; here it is split into :meth:`Session.try_activate`
(one transaction) and the watch, which the simulator wires to a SimPy event.
"""

from __future__ import annotations

import json

from ..config import TSOParams
from ..events import NULL_RECORDER, Recorder
from ..storage.kv import BaseKV

DEFAULT_SERVICE_ROOT = "session"


def active_key(meta_root: str, server_name: str) -> str:
    """``path.Join(metaRoot, DefaultServiceRoot, ServerName)``, e.g. ``by-dev/meta/session/rootcoord``."""
    return f"{meta_root}/{DEFAULT_SERVICE_ROOT}/{server_name}"


class Session:
    """``sessionutil.Session`` for one coordinator instance."""

    def __init__(
        self,
        kv: BaseKV,
        server_name: str,
        server_id: int,
        node: str,
        params: TSOParams | None = None,
        meta_root: str = "by-dev/meta",
        recorder: Recorder = NULL_RECORDER,
    ):
        self.kv = kv
        self.server_name = server_name
        self.server_id = server_id
        self.node = node
        self.params = params or TSOParams()
        self.meta_root = meta_root
        self.recorder = recorder
        self.lease_id: int | None = None
        self.is_active = False

    @property
    def active_key(self) -> str:
        """The key whose owner is ACTIVE."""
        return active_key(self.meta_root, self.server_name)

    @property
    def session_key(self) -> str:
        """This instance's own session key, ``session/<name>-<id>``."""
        return f"{self.meta_root}/{DEFAULT_SERVICE_ROOT}/{self.server_name}-{self.server_id}"

    def _json(self) -> bytes:
        return json.dumps({"ServerID": self.server_id, "ServerName": self.server_name, "Node": self.node},
                          sort_keys=True).encode()

    def register(self) -> None:
        """``registerService``: grant a lease and put the session key under it."""
        self.lease_id = self.kv.grant(self.params.session_ttl_ns)
        self.kv.save(self.session_key, self._json(), lease=self.lease_id)
        self.recorder.emit("session.register", self.node,
                           detail={"lease": self.lease_id, "ttl_s": self.params.session_ttl_ns / 1e9})

    def keep_alive(self) -> None:
        """``KeepAliveOnce``: push the lease expiry to now + TTL (raises if it already expired)."""
        self.kv.keep_alive(self.lease_id, self.params.session_ttl_ns)

    def try_activate(self) -> bool:
        """One round of ``registerActiveFn``: put the ACTIVE key if absent, under our lease."""
        won = self.kv.put_if_absent(self.active_key, self._json(), lease=self.lease_id)
        if won:
            self.is_active = True
            self.recorder.emit("session.active", self.node, active=self.node,
                               detail={"key": self.active_key, "server_id": self.server_id})
        else:
            self.recorder.emit("session.standby", self.node, active=current_active(self.kv, self.active_key))
        return won

    def revoke(self) -> None:
        """``Revoke``: a graceful stop gives the lock up at once."""
        if self.lease_id is not None:
            self.kv.revoke(self.lease_id)
        self.is_active = False


def current_active(kv: BaseKV, key: str) -> str | None:
    """The node name stored at an ACTIVE key, or None (how proxies discover rootcoord)."""
    try:
        return json.loads(kv.load(key))["Node"]
    except Exception:
        return None
