"""RootCoord's ``Core``: the TSO allocator, ``tsLoop`` and the ``AllocTimestamp`` RPC.

Models ``internal/rootcoord/root_coord.go`` (``initTSOAllocator``, ``tsLoop``, ``AllocTimestamp``) and
the keys of ``internal/rootcoord/constrant.go``. The TSO lives at ``by-dev/kv/gid/timestamp``.

The ticker of ``tsLoop`` is a simulator process (``milvus_edu.sim``) or a thread (``milvus_edu.live``)
that calls :meth:`Core.ts_loop_tick` every ``UpdateTimestampStep`` (50 ms).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import MS, BugSwitches, TSOParams
from ..effects import Sleep
from ..events import NULL_RECORDER, Recorder
from ..storage.kv import KVError, RootedKV
from ..tso import GlobalTSOAllocator, TSOError
from ..tso.global_allocator import SleepSteps
from ..tsoutil import physical_time

KV_ROOT_PATH = "by-dev/kv"  # ${etcd.rootPath}/${etcd.kvSubPath}
GLOBAL_ID_ALLOCATOR_SUB_PATH = "gid"  # globalIDAllocatorSubPath
GLOBAL_TSO_ALLOCATOR_KEY = "timestamp"  # globalTSOAllocatorKey
BLOCK_TIMESTAMP_EXTRA_SLEEP_NS = 200 * MS


class Core:
    """The TSO part of rootcoord's ``Core``."""

    def __init__(
        self,
        kv,
        now_ns: Callable[[], int],
        node: str = "rootcoord",
        params: TSOParams | None = None,
        switches: BugSwitches | None = None,
        recorder: Recorder = NULL_RECORDER,
    ):
        self.kv = kv
        self.now_ns = now_ns
        self.node = node
        self.params = params or TSOParams()
        self.switches = switches or BugSwitches()
        self.recorder = recorder
        self._emit_alloc = recorder.emitter("rootcoord.alloc_timestamp", "ts", "count", "peer")
        self.tso_allocator: GlobalTSOAllocator | None = None

    def init_tso_allocator(self) -> None:
        """``initTSOAllocator``: allocator over ``NewTSOKVBase(etcd, "by-dev/kv", "gid")``, then Initialize."""
        tso_kv = RootedKV(self.kv, f"{KV_ROOT_PATH}/{GLOBAL_ID_ALLOCATOR_SUB_PATH}")
        allocator = GlobalTSOAllocator(
            GLOBAL_TSO_ALLOCATOR_KEY, tso_kv, self.now_ns, self.params, self.switches, self.recorder, self.node
        )
        allocator.initialize()  # an error propagates and leaves the previous allocator in place, as in Go
        self.tso_allocator = allocator

    def set_switches(self, switches: BugSwitches) -> None:
        """Use ``switches`` from now on (a switch flipped part-way): for the next ``InitTimestamp`` and in the
        running allocator's ``UpdateTimestamp``."""
        self.switches = switches
        if self.tso_allocator is not None:
            self.tso_allocator.tso.switches = switches

    def ts_loop_tick(self) -> bool:
        """One tick of ``tsLoop``: ``UpdateTSO``; an error is logged (as an event) and the loop goes on."""
        try:
            self.tso_allocator.update_tso()
        except KVError:
            return False
        return True

    def alloc_timestamp_steps(self, count: int, block_timestamp: int = 0, peer: str | None = None) -> SleepSteps:
        """``AllocTimestamp`` as a step generator; returns ``(first_ts, count)``.

        ``GenerateTSO`` returns the LAST ts of the batch; the RPC answers with the FIRST, ``ts - count + 1``.
        With ``block_timestamp`` set, the call first waits until the saved window passes it (+200 ms).
        """
        if block_timestamp > 0:
            # blockTime.Sub(lastTime): the block time has ms resolution, the saved time ns resolution
            delta_ns = physical_time(block_timestamp) * MS - self.tso_allocator.get_last_saved_time()
            if delta_ns > 0:
                yield Sleep(delta_ns + BLOCK_TIMESTAMP_EXTRA_SLEEP_NS)
        try:
            last = yield from self.tso_allocator.generate_tso_steps(count)
        except TSOError as exc:
            self.recorder.emit("rootcoord.alloc_timestamp", self.node, count=count, peer=peer, error=str(exc))
            raise
        first = last - count + 1
        self._emit_alloc(self.node, first, count, peer)
        return first, count
