"""Coordinator sessions: the etcd lease, its keep-alive, the liveness check and the active/standby lock.

Models ``internal/util/sessionutil/session_util.go`` of Milvus 2.5 (``Register``/``registerService``,
``processKeepAliveResponse``, ``LivenessCheck``, ``cancelKeepAlive``, ``safeCloseLiveCh``,
``ProcessActiveStandBy``, ``Revoke``) and the part of etcd's Go client it relies on,
``client/v3/lease.go`` of etcd v3.5.5 (the version 2.5's ``go.mod`` pins): ``KeepAlive``,
``sendKeepAliveLoop``, ``recvKeepAlive``, ``deadlineLoop``, ``KeepAliveOnce``. etcd's server answers a
keep-alive for a lease it no longer knows with TTL 0 (``server/etcdserver/api/v3rpc/lease.go``,
``leaseKeepAlive``).

Active/standby is **off** by default in 2.5: ``rootCoord.enableActiveStandby`` defaults to ``false``
(``pkg/util/paramtable/component_param.go`` and ``configs/milvus.yaml``). Rootcoord then registers the
bare ``session/rootcoord`` key itself and a second instance cannot start. This project's scenarios
turn it on, to show a failover: each instance registers ``session/rootcoord-<id>`` and the winner of
``ProcessActiveStandBy`` holds ``by-dev/meta/session/rootcoord`` (the ACTIVE key) under its lease.

The lease (TTL ``common.session.ttl``, paramtable default 60 s) is kept alive the way etcd's client does:

* ``KeepAlive`` creates a record that is due at once, so the first keep-alive goes out immediately;
* every answer with TTL > 0 makes the next keep-alive due TTL/3 after *that answer* and sets the
  client-side deadline a TTL after it (``recvKeepAlive``);
* the send loop wakes every 500 ms (``retryConnWait``) and sends every overdue keep-alive, so one that
  gets no answer (etcd unreachable) is sent again every 500 ms until one is answered;
* the deadline loop wakes every second and closes the keep-alive channel of a lease that got no
  answer for a whole TTL; an answer with TTL 0 closes it too.

When the channel closes, ``processKeepAliveResponse`` tries ``KeepAliveOnce`` three times
(``retry.Attempts(3)``, each call under a 10 s context, ``retry.Do`` sleeping 200, 400 and 800 ms
after the failures) and, if all fail, closes ``liveCh``. ``LivenessCheck`` (started only once the
coordinator is active) then calls rootcoord's callback, ``os.Exit(1)``. ``LivenessCheck`` also
watches the session key, which for an exclusive coordinator like rootcoord is the ACTIVE key: a
DELETE cancels the keep-alive, the channel closes as cancelled, ``liveCh`` closes, and the process exits.

Simplification: Go's goroutines and channels become state the caller drives: :class:`KeepAlive`
holds the lessor's per-lease record, and the simulator runs the send loop, the deadline loop and the watch.
Simplification: ``ProcessActiveStandBy`` blocks in Go; here it is :meth:`Session.try_activate` (one
transaction) plus a watch the simulator waits on.
Simplification: ``KeepAliveOnce`` against an unreachable etcd is retried every 500 ms until its 10 s
context ends; gRPC's own reconnect back-off is not modelled.
Simplification: one keep-alive channel per lease (etcd multiplexes several; Milvus opens one).
Simplification: ``registerService``'s compare-and-put of the session key and ``handleRestart`` are a
plain put (server ids are unique here); watch revisions and the compacted-watch re-init are left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator

from ..config import MS, S, TSOParams
from ..effects import Sleep
from ..events import NULL_RECORDER, Recorder
from ..storage.kv import BaseKV, KVError, LeaseNotFoundError

DEFAULT_SERVICE_ROOT = "session"

RETRY_CONN_WAIT_NS = 500 * MS  # clientv3 retryConnWait: the send loop's period
DEADLINE_LOOP_PERIOD_NS = 1 * S  # clientv3 deadlineLoop's timer
ETCD_DIAL_TIMEOUT_NS = 5 * S  # pkg/util/etcd.GetRemoteEtcdClient: DialTimeout
FIRST_KEEP_ALIVE_TIMEOUT_NS = ETCD_DIAL_TIMEOUT_NS + 1 * S  # clientv3 NewLease: DialTimeout + 1 s
KEEP_ALIVE_ONCE_ATTEMPTS = 3  # processKeepAliveResponse: retry.Attempts(3)
KEEP_ALIVE_ONCE_TIMEOUT_NS = 10 * S  # processKeepAliveResponse: context.WithTimeout(..., 10 s)
RETRY_SLEEP_NS = 200 * MS  # retry.Do default first sleep
RETRY_MAX_SLEEP_NS = 3 * S  # retry.Do default maxSleepTime


def active_key(meta_root: str, server_name: str) -> str:
    """``path.Join(metaRoot, DefaultServiceRoot, ServerName)``, e.g. ``by-dev/meta/session/rootcoord``."""
    return f"{meta_root}/{DEFAULT_SERVICE_ROOT}/{server_name}"


def retry_do_sleeps(attempts: int, sleep_ns: int = RETRY_SLEEP_NS,
                    max_sleep_ns: int = RETRY_MAX_SLEEP_NS) -> Iterator[int]:
    """The sleeps of ``retry.Do`` after each of ``attempts`` failures (``pkg/util/retry/retry.go``).

    The sleep doubles up to ``max_sleep_ns``. Quirk: ``retry.Do`` sleeps after the *last* failed
    attempt too, before it returns the error, so three attempts cost 200 + 400 + 800 ms of sleeping.
    """
    if attempts < 1:
        raise ValueError(f"retry attempts must be at least 1, got {attempts}")
    for _ in range(attempts):
        yield sleep_ns
        sleep_ns = min(sleep_ns * 2, max_sleep_ns)


class KeepAlive:
    """etcd clientv3's ``keepAlive`` record of one lease: when the next keep-alive is due, when to give up.

    Mirrors the fields ``nextKeepAlive`` and ``deadline`` and the functions that move them:
    ``lessor.KeepAlive`` (creation), ``recvKeepAlive`` (an answer), ``deadlineLoop`` (no answer for a
    TTL) and ``keepAliveCtxCloser`` (the caller cancelled). A closed record stays closed; Milvus
    calls ``KeepAlive`` again for a fresh one.
    """

    def __init__(self, now_ns: int, first_keep_alive_timeout_ns: int = FIRST_KEEP_ALIVE_TIMEOUT_NS):
        self.next_keep_alive_ns = now_ns
        self.deadline_ns = now_ns + first_keep_alive_timeout_ns
        self.answered = False
        self.closed = False
        self.cancelled = False

    def due(self, now_ns: int) -> bool:
        """``sendKeepAliveLoop``'s test ``ka.nextKeepAlive.Before(now)``.

        A fresh record counts as due even at its creation instant: in Go ``nextKeepAlive`` is the
        creation's ``time.Now()``, always before the send loop's own later reading; in simulated
        time the two readings can be equal.
        """
        if self.closed:
            return False
        return not self.answered or self.next_keep_alive_ns < now_ns

    def recv(self, ttl_ns: int, now_ns: int) -> bool:
        """``recvKeepAlive``: TTL <= 0 closes the channel; otherwise next = now + TTL/3, deadline = now + TTL.

        Returns whether the channel is still open.
        """
        if self.closed:
            return False
        if ttl_ns <= 0:
            self.closed = True
            return False
        self.answered = True
        self.next_keep_alive_ns = now_ns + ttl_ns // 3
        self.deadline_ns = now_ns + ttl_ns
        return True

    def check_deadline(self, now_ns: int) -> bool:
        """``deadlineLoop``: close the channel when ``deadline.Before(now)``; True if this call closed it."""
        if self.closed or not self.deadline_ns < now_ns:
            return False
        self.closed = True
        return True

    def cancel(self) -> None:
        """``keepAliveCtxCloser`` after the caller cancelled the context: the channel closes."""
        self.closed = True
        self.cancelled = True


class Session:
    """``sessionutil.Session`` of one coordinator instance (rootcoord registers as exclusive).

    ``now_ns`` is the process's monotonic clock, which etcd's client uses for keep-alive timing (a
    wall-clock jump does not move it). ``retry_times`` is ``common.session.retryTimes`` (default 30).
    """

    def __init__(
        self,
        kv: BaseKV,
        server_name: str,
        server_id: int,
        node: str,
        params: TSOParams | None = None,
        meta_root: str = "by-dev/meta",
        recorder: Recorder = NULL_RECORDER,
        now_ns: Callable[[], int] | None = None,
        retry_times: int = 30,  # common.session.retryTimes
    ):
        self.kv = kv
        self.server_name = server_name
        self.server_id = server_id
        self.node = node
        self.params = params or TSOParams()
        self.meta_root = meta_root
        self.recorder = recorder
        self.now_ns = now_ns or (lambda: 0)
        self.retry_times = retry_times
        self.lease_id: int | None = None
        self.is_active = False
        self.keep_alive: KeepAlive | None = None
        self.live = False
        self.lost_reason: str | None = None
        self._unanswered = 0

    @property
    def ttl_ns(self) -> int:
        """The lease TTL, ``common.session.ttl``."""
        return self.params.session_ttl_ns

    @property
    def active_key(self) -> str:
        """The key whose owner is ACTIVE."""
        return active_key(self.meta_root, self.server_name)

    @property
    def session_key(self) -> str:
        """This instance's own key, ``getCompleteKey`` while standby: ``session/<name>-<id>``."""
        return f"{self.meta_root}/{DEFAULT_SERVICE_ROOT}/{self.server_name}-{self.server_id}"

    @property
    def watched_key(self) -> str:
        """``getSessionKey``, the key ``LivenessCheck`` watches: the bare role key of an exclusive server.

        Rootcoord calls ``Session.Init(RootCoordRole, addr, exclusive=true, triggerKill=true)``, so this
        is ``session/rootcoord``: with active/standby on, the ACTIVE key.
        """
        return active_key(self.meta_root, self.server_name)

    def _registered(self) -> KeepAlive:
        if self.keep_alive is None:
            raise ValueError(f"{self.node} has no session yet; call register() first")
        return self.keep_alive

    def _json(self) -> bytes:
        return json.dumps({"ServerID": self.server_id, "ServerName": self.server_name, "Node": self.node},
                          sort_keys=True).encode()

    def register(self) -> None:
        """``Register``/``registerService``: grant a lease, put the session key under it, start ``KeepAlive``.

        Raises :class:`KVError` when etcd fails (``Register`` retries ``retry_times`` times, then panics).
        """
        lease = self.kv.grant(self.ttl_ns)
        self.kv.save(self.session_key, self._json(), lease=lease)
        self.lease_id = lease
        self.keep_alive = KeepAlive(self.now_ns())
        self.live = True
        self.lost_reason = None
        self._unanswered = 0
        self.recorder.emit("session.register", self.node, detail={"lease": lease, "ttl_s": self.ttl_ns / S})

    def send_keep_alive(self) -> bool:
        """One request of ``sendKeepAliveLoop`` and etcd's answer, handled by ``recvKeepAlive``.

        etcd renews the lease to now + TTL and answers the TTL; for a lease it no longer knows it
        answers TTL 0, which closes the channel. An unreachable etcd answers nothing: the record
        stays overdue and the next turn of the send loop sends again. Returns whether the lease was renewed.
        """
        ka = self._registered()
        now = self.now_ns()
        try:
            self.kv.keep_alive(self.lease_id, self.ttl_ns)
        except LeaseNotFoundError:
            ka.recv(0, now)
            self.recorder.emit("session.keepalive_failed", self.node,
                               error="etcd answered TTL 0 (lease not found); the keep-alive channel closes",
                               detail={"lease": self.lease_id})
            return False
        except KVError as exc:
            self._unanswered += 1
            if self._unanswered == 1:  # one event per outage; the retries every 500 ms are implied
                self.recorder.emit("session.keepalive_failed", self.node, error=str(exc),
                                   detail={"lease": self.lease_id, "resend_every_ms": RETRY_CONN_WAIT_NS / MS,
                                           "client_deadline_in_s": (ka.deadline_ns - now) / S})
            return False
        ka.recv(self.ttl_ns, now)
        detail = {"lease": self.lease_id, "ttl_s": self.ttl_ns / S, "next_in_s": self.ttl_ns // 3 / S}
        if self._unanswered:
            detail["unanswered_before"] = self._unanswered
        self._unanswered = 0
        self.recorder.emit("session.keepalive", self.node, detail=detail)
        return True

    def check_deadline(self) -> bool:
        """``deadlineLoop``'s check of this lease; True when it has just closed the keep-alive channel."""
        if not self._registered().check_deadline(self.now_ns()):
            return False
        self.recorder.emit("session.keepalive_failed", self.node,
                           error="no keep-alive answer for a whole TTL; etcd's client closes the keep-alive channel",
                           detail={"lease": self.lease_id})
        return True

    def keep_alive_once(self) -> None:
        """``KeepAliveOnce``: renew the lease once, outside the stream.

        Raises :class:`LeaseNotFoundError` for an expired or revoked lease (etcd's TTL 0 answer,
        ``rpctypes.ErrLeaseNotFound``) and :class:`KVError` when etcd cannot be reached.
        """
        self.kv.keep_alive(self.lease_id, self.ttl_ns)

    def _keep_alive_once_within(self, timeout_ns: int) -> Generator[Sleep, None, str | None]:
        waited = 0
        while True:
            try:
                self.keep_alive_once()
                return None
            except LeaseNotFoundError as exc:
                return str(exc)
            except KVError:
                # KeepAliveOnce loops over "unavailable" errors until its context ends
                step = min(RETRY_CONN_WAIT_NS, timeout_ns - waited)
                yield Sleep(step)
                waited += step
                if waited >= timeout_ns:
                    return "context deadline exceeded"

    def process_keep_alive_response_steps(self) -> Generator[Sleep, None, bool]:
        """``processKeepAliveResponse`` once the keep-alive channel has closed, as a step generator.

        Yields :class:`~milvus_edu.effects.Sleep` effects (a node's interpreter performs them) and returns
        True when ``KeepAliveOnce`` renewed the lease and a fresh ``KeepAlive`` runs, False when
        ``liveCh`` was closed (the session is lost; :attr:`lost_reason` says why).

        * closed because Milvus cancelled the keep-alive (``LivenessCheck`` saw its key deleted):
          close ``liveCh`` at once;
        * otherwise ``retry.Do(KeepAliveOnce, Attempts(3))``, each call under a 10 s context.
        """
        if self._registered().cancelled:
            self.close_live_ch(self.lost_reason or "the keep-alive was cancelled")
            return False
        error = ""
        sleeps = retry_do_sleeps(KEEP_ALIVE_ONCE_ATTEMPTS)
        for attempt, sleep in enumerate(sleeps, start=1):
            error = yield from self._keep_alive_once_within(KEEP_ALIVE_ONCE_TIMEOUT_NS)
            if error is None:
                self.keep_alive = KeepAlive(self.now_ns())
                self.recorder.emit("session.keepalive", self.node,
                                   detail={"lease": self.lease_id, "ttl_s": self.ttl_ns / S,
                                           "via": "KeepAliveOnce", "attempt": attempt})
                return True
            self.recorder.emit("session.keepalive_failed", self.node, error=error,
                               detail={"lease": self.lease_id, "via": "KeepAliveOnce", "attempt": attempt})
            yield Sleep(sleep)
        self.close_live_ch(f"KeepAliveOnce failed {KEEP_ALIVE_ONCE_ATTEMPTS} times ({error})")
        return False

    def cancel_keep_alive(self) -> None:
        """``cancelKeepAlive``: cancel the keep-alive context; etcd's client closes the channel."""
        if self.keep_alive is not None:
            self.keep_alive.cancel()

    def close_live_ch(self, reason: str) -> None:
        """``safeCloseLiveCh``: close ``liveCh`` once, remembering why; later calls do nothing."""
        if self.live:
            self.live = False
            self.lost_reason = reason

    def on_watched_key_deleted(self) -> None:
        """``LivenessCheck``'s DELETE branch, run to its end: cancel the keep-alive, close ``liveCh``.

        In Go the cancelled channel wakes ``processKeepAliveResponse``, which closes ``liveCh``, which
        ends ``LivenessCheck``, which calls the owner's callback; those hops take microseconds.
        """
        self.cancel_keep_alive()
        self.close_live_ch(f"its session key {self.watched_key} was deleted")

    def try_activate(self) -> bool:
        """One round of ``registerActiveFn``: put the ACTIVE key if absent, under our lease.

        Raises :class:`KVError` on an etcd error, including :class:`LeaseNotFoundError` when our own
        lease is gone (the transaction's put fails); ``ProcessActiveStandBy`` then sleeps 100 ms and retries.
        """
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
