"""Simulated processes of the DML path: proxies, rootcoord's timetick sync, pchannel consumers.

The Go goroutines become SimPy processes that call the pure components:

* a proxy's DML request path (``dmTaskQueue.Enqueue`` under ``statsLock``, then ``processTask``:
  execute, produce, ``PopActiveTask``) -> :meth:`ProxyNode.insert`;
* the proxy's ``channelsTimeTicker.tickLoop`` (every ``proxy.timeTickInterval / 2``) and
  ``sendChannelsTimeTickLoop`` (every ``proxy.timeTickInterval``) -> :meth:`ProxyNode.tick_loop`,
  :meth:`ProxyNode.report_loop`;
* rootcoord's ``UpdateChannelTimeTick`` RPC, the scheduler's ``syncTsLoop`` (moves the DDL minimum on every
  200 ms), ``startTimeTickLoop`` (sends the DDL minimum every 200 ms, on a ticker of its own) and
  ``timetickSync.startWatch`` (a round of time ticks whenever every session has reported) ->
  :class:`RootCoordTimeTick`;
* a DataNode/QueryNode-side dispatcher per pchannel (``msgdispatcher``) -> :class:`ConsumerNode`.

Each loop runs on its own ``time.NewTicker``, whose grid is fixed when the loop starts; so the loops keep the
offsets (phases) they start with, and a round of time ticks carries values of different ages. The model draws
each loop's phase from the run's seed (:func:`draw_phase`) unless the ``timetick.*_phase_ms`` parameters set it.

The statistics lock (:class:`StatsLock`) is held across simulated time: a timestamp allocation is an
RPC, and the lock must be held across it (the design documents' six steps show why, book/seeds.md); the ticker's statistics
read waits for it too, as ``getPChanStatsInfo`` takes ``statsLock`` in Go. The bug switch
``allocate_outside_enqueue_lock`` allocates before taking it. The queue's ``atLock`` is modelled too: a finished
task's ``PopActiveTask`` holds it while it waits for ``statsLock``, so a task dequeued meanwhile cannot
``AddActiveTask`` and start; the finished task's client has its answer already (``processTask`` notifies it before
the pop).

Simplification: proxies discover rootcoord once, at start; the TimeTick scenarios have no rootcoord failover.
Simplification: a DML task's execution is one random delay, then one produce per vchannel it writes to; its
sends, like those of a round of time ticks, are scheduled when it starts, so a pause of the node does not hold
back what it has started to send.
Simplification: the DDL source's allocations never wait for a logical overflow; one that would is an error, and the DDL minimum keeps its last value.
Simplification: a proxy whose first allocation (``channelsTimeTickerImpl.start``) fails tries again every 100 ms;
in Go ``Proxy.Start`` returns the error and the proxy does not start.
Simplification: each loop's phase is drawn uniformly over its period (or set), not derived from how the process
started: in 2.5 ``startInternal`` creates syncTsLoop's ticker just before startTimeTickLoop's, and ``Proxy.Start``
tickLoop's just before the report loop's, so inside one process the offsets are small and set by goroutine scheduling.
"""

from __future__ import annotations

import heapq
from functools import partial

import simpy

from ..config import MS, PHASE_DRAWN
from ..merr import CollectionNotFoundError, wrap_err_collection_not_found
from ..mq import Broker, DeleteMsg, Dispatcher, SubscriptionPosition, TimeTickMsg, hash_pk_2_channels
from ..mq.fast import new_insert_msg, new_msg_position
from ..mq.names import to_physical_channel
from ..proto import ALL_PARTITIONS_ID, ChannelTimeTickMsg, MsgType
from ..proxy import ChannelsTimeTicker, DmlTask, DmTaskQueue, channels_time_tick_msg
from ..rootcoord import DdlTsLockManager, Scheduler, TimetickSync, send_min_ddl_ts_as_tt, update_channel_time_tick
from ..sim.kernel import NodeClock, RPCError, Simulation
from ..storage.kv import LeaseNotFoundError
from ..effects import Call
from ..tso import TSOError
from .node import Node
from ..sim.ticker import Ticker
from .rootcoord import RootCoordNode

PROXY_SESSION_PREFIX = "by-dev/meta/session/proxy-"
READER, WRITER = 0, 1  # statsLock priorities: RLock (statistics reads) before Lock (enqueue, pop)
_DML_TYPES = frozenset({MsgType.INSERT, MsgType.DELETE})
_INSERT = MsgType.INSERT


def _describe_collection(collection: Collection) -> int:
    """Rootcoord's ``DescribeCollection`` by id as the proxy's meta cache asks it: the id, or "collection not
    found[collection=<id>]" (``WrapErrCollectionNotFound``) before the collection's CreateCollection ran."""
    if not collection.created:
        raise wrap_err_collection_not_found(collection.id)
    return collection.id


def draw_phase(sim: Simulation, stream: str, param_ms: float, period_ms: float) -> float:
    """A loop's phase in ms: ``param_ms`` when a ``timetick.*_phase_ms`` parameter sets it, otherwise drawn
    uniformly from ``[0, period_ms)`` by the seeded random stream ``phase/<stream>`` (its own stream, so the
    other components' draws do not move)."""
    if param_ms != PHASE_DRAWN:
        return param_ms
    return sim.rng(f"phase/{stream}").random() * period_ms


class StatsLock:
    """The proxy's ``statsLock``: held by one task at a time, across simulated time.

    :meth:`acquire` takes the lock at once when it is free (no SimPy event: most acquisitions find it
    free, and this runs several times per DML task); otherwise it returns an event that fires once
    the lock has been handed over. Waiting requests are served by ``priority`` (lower first: the
    ticker's read before enqueues and pops), then in arrival order. The holder must call
    :meth:`release` exactly once, whatever happens (``try``/``finally``).

    The DML queue's ``atLock`` (a plain mutex) is one too, every request at the one priority, served in arrival
    order.

    Simplification: Go's ``statsLock`` is an RWMutex, which readers may share; a proxy has one reader
    (its ticker), so a mutex serves. The order is Go's: a reader waits only for the writer that holds
    the lock (or has announced itself next), while writers queued behind it wait on the RWMutex's
    inner mutex, so a waiting read goes before waiting enqueues and pops.
    """

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.held = False
        self._waiting: list[tuple[int, int, simpy.Event]] = []  # heap of (priority, arrival, event)
        self._arrivals = 0

    def acquire(self, priority: int) -> simpy.Event | None:
        """Take the lock: ``None`` when it was free, else the event to wait for."""
        if not self.held:
            self.held = True
            return None
        event = self.env.event()
        heapq.heappush(self._waiting, (priority, self._arrivals, event))
        self._arrivals += 1
        return event

    def release(self) -> None:
        """Give the lock to the first waiting request, or free it."""
        if self._waiting:
            heapq.heappop(self._waiting)[2].succeed()
        else:
            self.held = False


class Collection:
    """A collection as the DML path sees it: its id, partition, and shards (vchannels) in order."""

    def __init__(self, collection_id: int, vchannels: list[str], partition_id: int | None = None):
        self.id = collection_id
        self.vchannels = list(vchannels)
        self.partition_id = partition_id if partition_id is not None else collection_id * 10 + 1
        # Looked up on every insert, so worked out once: ToPhysicalChannel of each vchannel, and the
        # pchannels in order (a DML task's channels, as getChannels returns them).
        self.pchannel_of = {v: to_physical_channel(v) for v in self.vchannels}
        self.pchannels = tuple(sorted(set(self.pchannel_of.values())))
        self._segments = {v: collection_id * 1000 + i for i, v in enumerate(self.vchannels)}
        #: Bytes of field data (vectors, scalars) each row carries besides its key: ``InsertMsg.payload_bytes``.
        self.payload_bytes_per_row = 0
        #: Whether rootcoord's meta has the collection (its CreateCollection ran): True for a collection that
        #: exists from the start; a cluster that creates it by DDL sets it once the DDL is done.
        self.created = True

    def segment_of(self, vchannel: str) -> int:
        """The growing segment a vchannel's rows go to (one per shard here)."""
        return self._segments[vchannel]


class ProxyNode(Node):
    """One proxy: DML tasks through the locked enqueue, the channels ticker and the report loop.

    ``task_ms``: mean of the exponential execution time of a DML task (before its messages are
    produced), so tasks finish out of timestamp order. ``rootcoord_extra_ms``: extra one-way delay on
    this proxy's link to rootcoord (a slow link).
    """

    PERFORMERS = {**Node.PERFORMERS, Call: "_perform_call_on_link"}
    SWITCHES = ("allocate_outside_enqueue_lock",)
    COMPONENT = "the proxy's DML path"

    def __init__(self, sim: Simulation, name: str, server_id: int, rootcoord: RootCoordNode, broker: Broker,
                 task_ms: float = 4.0, rootcoord_extra_ms: float = 0.0):
        super().__init__(sim, name)
        self.server_id = server_id
        self.rootcoord = rootcoord
        self.broker = broker
        self.task_ms = task_ms
        self.rootcoord_extra_ms = rootcoord_extra_ms
        #: Put each message's primary keys in its ``mq.produce`` event (``detail.pks``): what a read must see can
        #: then be worked out from the log alone. Off by default: TimeTick and flush runs do not need them.
        self.record_pks = False
        self.reports_stalled_until = 0.0
        #: ``(probability, extra_ms)``: how often an AllocTimestamp answer is held up, and by how much.
        self.alloc_hiccup: tuple[float, float] = (0.0, 0.0)
        self.rng = sim.rng(name)
        # AllocTimestamp(1) as an RPC to rootcoord (built once: every task asks)
        self._alloc_rpc = Call(rootcoord.name, partial(rootcoord.handle_alloc_timestamp, 1, name))
        # the events every DML task writes, bound once (emitted several times per insert)
        rec = sim.recorder
        self._emit_enqueue = rec.emitter("proxy.enqueue", "ts", "count", "channel", "min_ts", "max_ts")
        self._emit_finish = rec.emitter("proxy.finish", "ts", "channel", "min_ts", "max_ts")
        self._emit_produce = rec.emitter("mq.produce", "ts", "channel", "vchannel", "msg_id", "msg_type", "begin_ts",
                                         "end_ts", "count", "segment")
        self._fresh_state()

    def _fresh_state(self) -> None:
        params = self.sim.config.timetick
        self.queue = DmTaskQueue(params, stats=params.pchan_stats)
        self.lock = StatsLock(self.sim.env)
        #: The DML queue's ``atLock``.
        self.at_lock = StatsLock(self.sim.env)
        self.ticker: ChannelsTimeTicker | None = None
        self.lease: int | None = None
        self.next_msg_id = 0  # Base.MsgID of this proxy's messages (unique per message, as setMsgID gives)

    # ------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Register the proxy's session and start its loops."""
        ttl = self.sim.config.tso.session_ttl_ns
        self.lease = self.sim.kv.grant(ttl)
        self.sim.kv.save(f"{PROXY_SESSION_PREFIX}{self.server_id}", self.name.encode(), lease=self.lease)
        self.process(self._keep_alive(self.lease))
        self.process(self._start_ticker())

    def _keep_alive(self, lease: int):
        env, ttl = self.sim.env, self.sim.config.tso.session_ttl_ns
        while True:
            yield env.timeout(ttl / 3 / MS)
            try:
                self.sim.kv.keep_alive(lease, ttl)
            except LeaseNotFoundError:
                # The lease ran out while the proxy was paused: its session is gone, and Proxy.Register's
                # LivenessCheck callback exits the process ("Proxy disconnected from etcd, process will exit").
                self._end_life()
                self.sim.recorder.emit("session.exit", self.name, detail={
                    "reason": "Proxy disconnected from etcd, process will exit", "how": "os.Exit(1)",
                    "server_id": self.server_id})
                return

    def kill_detail(self, why: str) -> dict:
        """A proxy's ``fault.kill`` names its server id: in-flight tasks are lost, the session lease runs out
        on its own."""
        return {"server_id": self.server_id}

    def restart(self, server_id: int) -> None:
        """Start again after a kill, with a new server id and a new session (Milvus gives a restarted
        proxy a new ``ServerID``); the old session stays until its lease runs out."""
        self.server_id = server_id
        self._new_life()
        self._fresh_state()
        self.sim.recorder.emit("fault.restart", self.name, detail={"server_id": server_id})
        self.start()

    def stall_reports(self, duration_ms: float) -> None:
        """The report loop hangs for ``duration_ms`` (Milvus issue #34392's symptom): no
        UpdateChannelTimeTick leaves this proxy, so rootcoord's gate waits for it."""
        self.reports_stalled_until = self.sim.env.now + duration_ms
        self.sim.recorder.emit("fault.stall", self.name, detail={"loop": "sendChannelsTimeTickLoop",
                                                                 "duration_ms": duration_ms})

    # ------------------------------------------------------------------------------ RPC helpers

    def alloc_one(self):
        """``tsoAllocator.AllocOne`` for a caller's request (the read path), not bound to this proxy's life:
        ``yield from`` it for the FIRST ts of a batch of 1."""
        return self.on_behalf(self._alloc_one())

    def _alloc_one(self):
        """``tsoAllocator.AllocOne``: an AllocTimestamp RPC to rootcoord (the FIRST ts of a batch of 1)."""
        ts, _count = yield self._alloc_rpc
        prob, extra_ms = self.alloc_hiccup
        if prob and self.rng.random() < prob:
            yield self.sim.env.timeout(extra_ms)
        return ts

    def _perform_call_on_link(self, effect: Call):
        """An RPC over this proxy's links: ``rootcoord_extra_ms`` more on each leg of a call to rootcoord (on a
        link without it, ``Simulation.call``'s own generator: every DML task makes one)."""
        if not self.rootcoord_extra_ms or effect.dst != self.rootcoord.name:
            return self.sim.call(self.name, effect.dst, effect.handler)
        return self._call_slow_link(effect, self.rootcoord_extra_ms)

    def _call_slow_link(self, effect: Call, extra: float):
        yield self.sim.env.timeout(extra)
        result = yield from self.sim.call(self.name, effect.dst, effect.handler)
        yield self.sim.env.timeout(extra)
        return result

    # ------------------------------------------------------------------------------ DML path

    def insert(self, collection: Collection, pks: list[int], task_ms: float | None = None, fields=None):
        """One insert request: enqueue (allocate + statistics under the lock), execute, produce, pop.

        Like ``insertTask.setChannels``, the task counts on *every* pchannel of its collection, whichever
        its rows hash to: a proxy's minimum for a pchannel holds back on any write to the collection.
        Returns the task's timestamp once its messages are in the pchannels (the client's acknowledgement; the task
        leaves the queue then too, or, when a lock is taken, as soon as it can: Go notifies the client before
        ``PopActiveTask``), ``None`` when it failed or the proxy died. A collection rootcoord does not
        know yet fails the request before it enqueues (:meth:`_describe_collection`). ``task_ms`` fixes this task's
        execution time (default: exponential with mean ``self.task_ms``). ``fields``: each row's dynamic field
        (a dict per key of ``pks``), carried by the ``InsertMsg`` to the QueryNode and the binlogs; None for
        rows that carry only their key.

        A generator, as every simulated request is: run it as a SimPy process or ``yield from`` it. It is bound
        to the proxy's life: when the proxy dies the task stops at its next step.
        """
        return self.bound(self._dml(collection, pks, MsgType.INSERT, task_ms, fields))

    def delete(self, collection: Collection, pks: list[int]):
        """One delete request (``deleteTask``): the same DML path, a ``DeleteMsg`` per vchannel its keys hash to."""
        return self.bound(self._dml(collection, pks, MsgType.DELETE, None))

    def _dml(self, collection: Collection, pks: list[int], msg_type: str, task_ms: float | None, fields=None):
        if not collection.created and not (yield from self._describe_collection(collection)):
            return None
        sim = self.sim
        env = sim.env
        vchannels, pchannel_of = collection.vchannels, collection.pchannel_of
        rows: dict[str, list[int]] = {}
        shards = hash_pk_2_channels(pks, vchannels)
        for pk, shard in zip(pks, shards):
            rows.setdefault(vchannels[shard], []).append(pk)
        fields_on: dict[str, list] = {}
        if fields is not None:  # each row's dynamic field goes to the vchannel its key hashes to
            for f, shard in zip(fields, shards):
                fields_on.setdefault(vchannels[shard], []).append(f)
        pchannels = collection.pchannels
        rows_on = dict.fromkeys(pchannels, 0)  # rows per pchannel
        for vch, pks_v in rows.items():
            rows_on[pchannel_of[vch]] += len(pks_v)
        task = DmlTask(pchannels=pchannels, rows=len(pks))
        queue, lock = self.queue, self.lock
        try:
            if sim.config.switches.allocate_outside_enqueue_lock:
                ts = yield from self._alloc_one()
                wait = lock.acquire(WRITER)
                if wait is not None:
                    yield wait
                try:
                    queue.enqueue(task, ts)
                finally:
                    lock.release()
            else:
                wait = lock.acquire(WRITER)
                if wait is not None:
                    yield wait
                try:
                    ts = yield from self._alloc_one()
                    queue.enqueue(task, ts)
                finally:
                    lock.release()
        except RPCError:
            return
        self._emit_enqueue.rows(self.name, _enqueue_rows(ts, rows_on, queue.pchan_stats_view()))
        queue.pop_unissued_task()
        # processTask's AddActiveTask takes atLock, which a finished task's PopActiveTask holds while it waits for
        # statsLock: a task dequeued then starts only once that pop is done
        wait = self.at_lock.acquire(WRITER)
        if wait is not None:
            yield wait
        queue.add_active_task(task)
        self.at_lock.release()
        if task_ms is None:
            task_ms = self.rng.expovariate(1.0 / self.task_ms) if self.task_ms > 0 else 0.0
        # The task executes for task_ms; then msgstream.Produce sends every channel's pack at once and waits for
        # all the broker's answers: each send lands after its own one-way delay, and the task goes on when the
        # slowest answer is back. Nothing happens at the end of the execution but the sends, so the task waits
        # once, until that answer.
        answered = 0.0
        one_way, produce = sim.one_way, self._produce
        for vch in sorted(rows):
            sent = one_way(self.name)
            if fields_on:
                call = partial(produce, collection, vch, rows[vch], ts, msg_type, fields_v=fields_on[vch])
            else:
                call = partial(produce, collection, vch, rows[vch], ts, msg_type)
            env.timeout(task_ms + sent).callbacks.append(self.callback(call))
            answered = max(answered, sent + one_way("mq"))
        yield env.timeout(task_ms + answered)
        # processTask's deferred calls run last in, first out: Notify answers the client, then PopActiveTask
        self._pop_active_task(task, ts, pchannels)
        return ts

    def _pop_active_task(self, task: DmlTask, ts: int, pchannels) -> None:
        """``dmTaskQueue.PopActiveTask``: atLock first, held while it waits for statsLock; then the pop.

        With both locks free the pop is done at once, at the instant of the client's answer (and logged before it).
        Otherwise the client has its answer already and the pop goes on as the locks are handed over: driven by their
        events rather than by a process of its own (three in five tasks of a busy TimeTick run wait; a process each
        cost that run 4% more instructions). Each step is bound to the proxy's life, as a process would be, and
        reaches the locks through the proxy: a step that held a lock itself would tie the lock, its waiting list and
        the steps waiting in it into a reference cycle, left to the cyclic collector when the run is closed.
        """

        def pop(_event=None) -> None:  # both locks held
            try:
                self.queue.pop_active_task(task.id)
            finally:
                self.lock.release()
                self.at_lock.release()
            self._emit_finish.rows(self.name, _finish_rows(ts, pchannels, self.queue.pchan_stats_view()))

        def take_stats_lock(_event=None) -> None:  # atLock held
            wait = self.lock.acquire(WRITER)
            if wait is None:
                pop()
            else:
                wait.callbacks.append(self.callback(pop))

        wait = self.at_lock.acquire(WRITER)
        if wait is None:
            take_stats_lock()
        else:
            wait.callbacks.append(self.callback(take_stats_lock))

    def _describe_collection(self, collection: Collection):
        """Resolve a collection this proxy has not seen created; False (the request fails before it enqueues, the
        Milvus way) when rootcoord does not know it.

        In Go, ``dmTaskQueue.Enqueue`` first calls the task's ``setChannels`` (``insertTask.setChannels``,
        ``deleteTask.setChannels``): ``globalMetaCache.GetCollectionID`` misses, asks rootcoord
        (``DescribeCollection``) and returns its "collection not found"; the task never takes ``statsLock``, never
        allocates a timestamp and never asks DataCoord for a segment, and ``Proxy.Insert`` / ``Proxy.Delete``
        answer the client with that error ("Failed to enqueue insert task"). ``insertTask.PreExecute`` and
        ``deleteTask.PreExecute`` would check ``GetCollectionID`` again, but the task does not get that far.
        Here: one ``DescribeCollection`` round trip to rootcoord; when it fails, a ``proxy.meta_cache`` miss with
        its error, and the request gets its usual failed result (``None``); when the DDL finished meanwhile, the
        request goes on.

        Simplification: this proxy keeps no meta cache; a request for a created collection goes on as a cache hit
        would, with no event and no RPC.
        """
        rc = self.rootcoord
        try:
            yield Call(rc.name, partial(_describe_collection, collection))
        except RPCError as exc:
            cause = exc.__cause__
            self.sim.recorder.emit("proxy.meta_cache", self.name, peer=rc.name,
                                   error=str(cause if isinstance(cause, CollectionNotFoundError) else exc),
                                   detail={"result": "miss", "collection_id": collection.id})
            return False
        return True

    def _produce(self, collection: Collection, vch: str, pks_v: list[int], ts: int, msg_type: str, _sent: simpy.Event | None = None, fields_v: list | None = None) -> None:
        """One vchannel's ``InsertMsg`` (or ``DeleteMsg``) reaches its pchannel (a callback of the send's delay,
        bound to the proxy's life: a message of a dead proxy never lands)."""
        self.next_msg_id += 1
        msg_id = self.server_id * 10**12 + self.next_msg_id
        segment = None
        ch = collection.pchannel_of[vch]
        broker, pks, rows = self.broker, tuple(pks_v), len(pks_v)
        if msg_type == _INSERT:
            segment = collection.segment_of(vch)
            # built with the position the broker gives it, so that the broker keeps it as it is
            position = new_msg_position(ch, broker.next_msg_id(ch), ts)
            msg = new_insert_msg(vch, collection.id, collection.partition_id, segment, pks, (ts,) * rows,
                                 rows * collection.payload_bytes_per_row, msg_id, self.server_id, position,
                                 None if fields_v is None else tuple(fields_v))
        else:
            # deleteRunner.Run / simpleDelete: a delete that names no partition (no partition key either) carries
            # common.AllPartitionsID; the DataNode then buffers it in an L0 segment of partition -1
            msg = DeleteMsg(shard_name=vch, collection_id=collection.id, partition_id=ALL_PARTITIONS_ID,
                            pks=pks, timestamps=(ts,) * rows, msg_id=msg_id, source_id=self.server_id)
        log_id = broker.produce(ch, msg)
        if self.record_pks:
            self.sim.recorder.emit("mq.produce", self.name, ts=ts, channel=ch, vchannel=vch, msg_id=log_id,
                                   msg_type=msg_type, begin_ts=ts, end_ts=ts, count=rows, segment=segment,
                                   detail={"pks": list(pks_v)} if fields_v is None else
                                   {"pks": list(pks_v), "fields": list(fields_v)})
        else:
            self._emit_produce(self.name, ts, ch, vch, log_id, msg_type, ts, ts, rows, segment)

    # ------------------------------------------------------------------------------ ticker and reports

    def _start_ticker(self):
        """``channelsTimeTickerImpl.start`` then its ``tickLoop`` and the proxy's ``sendChannelsTimeTickLoop``."""
        env = self.sim.env
        queue = self.queue
        while True:
            try:
                first = yield from self._alloc_one()
                break
            except RPCError:
                yield env.timeout(self.sim.config.timetick.ticker_interval_ns / MS)
        p = self.sim.config.timetick
        ticker = ChannelsTimeTicker(lambda: first, queue.get_pchan_statistics, p)
        ticker.start()
        self.ticker = ticker
        # a restarted proxy draws again from the same stream: a new start, new phases
        tick_phase = draw_phase(self.sim, f"{self.name}/tickLoop", p.proxy_ticker_phase_ms, p.ticker_interval_ns / MS)
        report_phase = draw_phase(self.sim, f"{self.name}/sendChannelsTimeTickLoop", p.proxy_report_phase_ms,
                                  p.time_tick_interval_ns / MS)
        self.sim.recorder.emit("proxy.ticker_start", self.name, ts=first,
                               detail={"tick_phase_ms": round(tick_phase, 3), "report_phase_ms": round(report_phase, 3)})
        self.process(self.tick_loop(ticker, queue, tick_phase))
        self.process(self.report_loop(ticker, queue, report_phase))

    def tick_loop(self, ticker: ChannelsTimeTicker, queue: DmTaskQueue, phase_ms: float = 0.0):
        """``tickLoop``: every 100 ms allocate ``now``, read the statistics under the lock, ``tick``.

        Its ticker's grid starts ``phase_ms`` after the channels ticker started."""
        env = self.sim.env
        ticker_clock = Ticker(env, self.sim.config.timetick.ticker_interval_ns / MS, phase_ms)
        while True:
            yield ticker_clock.next()
            try:
                now = yield from self._alloc_one()
            except RPCError:
                continue
            lock = self.lock
            wait = lock.acquire(READER)
            if wait is not None:
                yield wait
            try:
                stats = queue.get_pchan_statistics()
            finally:
                lock.release()
            ticker.tick_with(now, stats)
            reported, default = ticker.get_min_ts_statistics()
            self.sim.recorder.emit("proxy.tick", self.name, ts=now, tick_ts=ticker.min_timestamp,
                                   detail={"reported": reported, "currents": dict(ticker.currents)})

    def report_loop(self, ticker: ChannelsTimeTicker, queue: DmTaskQueue, phase_ms: float = 0.0):
        """``sendChannelsTimeTickLoop``: every 200 ms send the ticker's values to rootcoord.

        Its ticker's grid starts ``phase_ms`` after the channels ticker started; it reads whatever the
        last ``tickLoop`` tick left, however old."""
        env = self.sim.env
        report_clock = Ticker(env, self.sim.config.timetick.time_tick_interval_ns / MS, phase_ms)
        while True:
            yield report_clock.next()
            if env.now < self.reports_stalled_until:
                continue
            msg = channels_time_tick_msg(ticker, self.server_id)
            if msg is None:
                continue
            rc = self.rootcoord
            self.sim.recorder.emit("proxy.report", self.name, ts=msg.default_timestamp, count=len(msg.channel_names),
                                   peer=rc.name, detail={"channels": dict(zip(msg.channel_names, msg.timestamps))})
            tt = rc_timetick(rc)
            try:
                yield Call(rc.name, partial(tt.handle_update_channel_time_tick, msg, self.name))
            except RPCError:
                continue


def _enqueue_rows(ts: int, rows_on: dict[str, int], stats) -> list[tuple]:
    """The ``proxy.enqueue`` rows of a task: ``(ts, rows, pchannel, min_ts, max_ts)`` for each of its
    pchannels (``rows_on``, in order), with the statistics just after the enqueue (a loop: this runs on
    every insert, and a comprehension's frame costs more than its four rows)."""
    rows = []
    for ch, count in rows_on.items():
        info = stats.get(ch)
        rows.append((ts, count, ch, info.min_ts, info.max_ts) if info is not None else (ts, count, ch, None, None))
    return rows


def _finish_rows(ts: int, pchannels: tuple[str, ...], stats) -> list[tuple]:
    """The ``proxy.finish`` rows of a task: ``(ts, pchannel, min_ts, max_ts)`` for each of its pchannels,
    with the statistics just after the pop (``None`` where no task is left on it)."""
    rows = []
    for ch in pchannels:
        info = stats.get(ch)
        rows.append((ts, ch, info.min_ts, info.max_ts) if info is not None else (ts, ch, None, None))
    return rows


def rc_timetick(rc: RootCoordNode) -> "RootCoordTimeTick":
    """The timetick sync that runs on rootcoord ``rc``."""
    return rc.timetick


def _generate_now(allocator, count: int) -> int:
    """``GenerateTSO`` when it needs no wait (the DDL source cannot sleep inside the tick loop here)."""
    steps = allocator.generate_tso_steps(count)
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    steps.close()
    raise TSOError("GenerateTSO would have to wait for the next tsLoop update")


class RootCoordTimeTick:
    """Rootcoord's side of TimeTick on one rootcoord node: the sync, the DDL loop and the watch round.

    Not a node of its own: its loops and watches run on the rootcoord node, bound to that node's life.
    """

    def __init__(self, sim: Simulation, rootcoord: RootCoordNode, broker: Broker, pchannels: list[str]):
        self.sim = sim
        self.rc = rootcoord
        self.broker = broker
        self.pchannels = list(pchannels)
        self.sync = TimetickSync(source_id=rootcoord.session.server_id)
        self.ddl_lock = DdlTsLockManager(self._generate_tso)
        self.scheduler = Scheduler(self._generate_tso)
        self.names: dict[int, str] = {-1: "ddl"}
        self._wake = sim.env.event()
        rootcoord.timetick = self

    def _generate_tso(self, count: int) -> int:
        allocator = getattr(self.rc.core, "tso_allocator", None)
        if allocator is None or not self.rc.serving:
            raise TSOError("rootcoord is not serving")
        return _generate_now(allocator, count)

    def start(self) -> None:
        """Wait until this rootcoord serves, then start the sync's loops."""
        self.rc.process(self._run())

    def _run(self):
        env, p = self.sim.env, self.sim.config.timetick
        while not self.rc.serving:
            yield env.timeout(self.sim.config.tso.update_timestamp_step_ns / MS)
        ids = []
        for key, value in self.sim.kv.load_with_prefix(PROXY_SESSION_PREFIX):
            sid = int(key[len(PROXY_SESSION_PREFIX):])
            self.names[sid] = value.decode()
            ids.append(sid)
        self.sync.init_sessions(ids)
        for sid in ids:
            self.sim.recorder.emit("rootcoord.session_add", self.rc.name, peer=self.names[sid])
        self.sim.kv.watch(PROXY_SESSION_PREFIX, self.rc.callback(self._on_proxy_session))
        self.rc.process(self._watch())
        interval = p.time_tick_interval_ns / MS
        phase = draw_phase(self.sim, f"{self.rc.name}/syncTsLoop", p.sync_ts_phase_ms, interval)
        self.sim.recorder.emit("rootcoord.ticker_start", self.rc.name, detail={"sync_ts_phase_ms": round(phase, 3)})
        # scheduler.Start (syncTsLoop) comes before startServerLoop (startTimeTickLoop) in startInternal: at
        # phase 0 both tick at one instant and the sync goes first, so the DDL minimum sent is fresh.
        self.rc.process(self._sync_ts_loop(Ticker(env, interval, -phase)))
        self.rc.process(self._time_tick_loop(Ticker(env, interval)))

    def _sync_ts_loop(self, clock: Ticker):
        """``scheduler.syncTsLoop``: on its own ticker, ``updateLatestTsoAsMinDdlTs`` enqueues an empty task,
        which ``taskLoop`` runs at once (``execute`` -> ``setMinDdlTs``): the DDL minimum moves on."""
        while True:
            yield clock.next()
            try:
                self.scheduler.update_latest_tso_as_min_ddl_ts()
                task = self.scheduler.next_task()
                if task is not None:
                    self.scheduler.execute(task)
            except TSOError:
                pass

    def _time_tick_loop(self, clock: Ticker):
        """``startTimeTickLoop``: on its own ticker, ``sendMinDdlTsAsTt`` sends the DDL minimum as it is."""
        while True:
            yield clock.next()
            self._ddl_tick()

    def _on_proxy_session(self, event: str, key: str) -> None:
        sid = int(key[len(PROXY_SESSION_PREFIX):])
        if event == "put":
            try:
                self.names[sid] = self.sim.kv.load(key).decode()
            except Exception:
                self.names.setdefault(sid, f"proxy#{sid}")
            self.sync.add_session(sid)
            self.sim.recorder.emit("rootcoord.session_add", self.rc.name, peer=self.names[sid])
        elif event == "delete":
            self.sync.del_session(sid)
            self.sim.recorder.emit("rootcoord.session_del", self.rc.name, peer=self.names.get(sid, str(sid)))
            self._kick()

    def _ddl_tick(self) -> None:
        """``sendMinDdlTsAsTt``: the smaller of the two DDL minimums, as ``syncTsLoop`` and DDL tasks left them."""
        p = self.sim.config.timetick
        out = send_min_ddl_ts_as_tt(self.sync, self.pchannels, self.ddl_lock, self.scheduler,
                                    healthy=self.rc.serving, tt_msg_enabled=p.tt_msg_enabled)
        if out.sent_ts is None:
            return
        self._record_update("ddl", out.sent_ts, bool(out.update is not None and out.update.sent), out.error)

    def _record_update(self, peer: str, default_ts: int, sent: bool, error: str | None,
                       channels: dict[str, int] | None = None) -> None:
        waiting = [self.names.get(s, str(s)) for s in self.sync.idle_sessions()] if not sent else []
        detail = None if error else {"sent": sent, "waiting_for": sorted(waiting), "channels": channels or {}}
        self.sim.recorder.emit("rootcoord.timetick_update", self.rc.name, ts=default_ts, peer=peer, error=error,
                               detail=detail)
        if sent:
            self._kick()

    def _kick(self) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def handle_update_channel_time_tick(self, msg: ChannelTimeTickMsg, peer: str):
        """The ``UpdateChannelTimeTick`` RPC handler (runs on rootcoord; answers at once)."""
        sent_before = self.sync.snapshots_sent + self.sync.snapshots_dropped
        status = update_channel_time_tick(self.rc.serving, self.sync, msg)
        sent = self.sync.snapshots_sent + self.sync.snapshots_dropped > sent_before
        self._record_update(peer, msg.default_timestamp, sent, None if status.ok else status.reason,
                            dict(zip(msg.channel_names, msg.timestamps)))
        return status

    def _watch(self):
        """``startWatch``: whenever a snapshot is pending, write one time tick into every pchannel.

        Go sends each pchannel's tick from a goroutine of its own and waits for all of them; here, as
        ``msgstream.Produce`` on the DML path, every tick lands after its own network leg and the round goes on
        once the slowest produce has been answered."""
        sim = self.sim
        env, one_way, rc = sim.env, sim.one_way, self.rc
        while True:
            yield self._wake
            self._wake = env.event()
            while self.sync.pending is not None:
                snapshot = self.sync.pending
                answered = 0.0
                for ch, ts in self.sync.watch_round() or []:
                    sent = one_way(rc.name)
                    env.timeout(sent).callbacks.append(rc.callback(self._send_tick, snapshot, ch, ts))
                    back = sent + one_way("mq")
                    if back > answered:
                        answered = back
                yield env.timeout(answered)

    def _send_tick(self, snapshot, ch: str, ts: int, _sent: simpy.Event) -> None:
        """``sendTimeTickToChannel`` for one pchannel, then ``syncedTtHistogram.update`` (a callback of the send's
        delay, bound to rootcoord's life: a tick of a dead rootcoord never lands)."""
        source = _min_source(snapshot, ch, ts)
        msg_id = self.broker.produce(ch, TimeTickMsg(timestamp=ts, source_id=self.sync.source_id))
        self.sim.recorder.emit("mq.produce", self.rc.name, ts=ts, channel=ch, msg_id=msg_id, msg_type="TimeTick",
                               begin_ts=ts, end_ts=ts, tick_ts=ts, detail={"min_from": self.names.get(source, str(source))})
        self.sync.on_time_tick_sent(ch, ts)


def _min_source(snapshot, ch: str, ts: int):
    """Which session's value (or the DDL source, -1) gave the round's minimum ``ts`` on ``ch``."""
    for source in sorted(snapshot, key=lambda s: (s != -1, s)):
        msg = snapshot[source]
        if msg is not None and msg.get_timetick(ch) == ts:
            return source
    return -1


class ConsumerNode(Node):
    """A dispatcher on one pchannel with one target per vchannel; packs go to the run log."""

    def __init__(self, sim: Simulation, name: str, broker: Broker, pchannel: str, vchannels: list[str]):
        super().__init__(sim, name)
        self.pchannel = pchannel
        self.clock = NodeClock(sim.env)
        self.dispatcher = Dispatcher(broker, pchannel, sub_pos=SubscriptionPosition.EARLIEST,
                                     now_ns=self.clock.now_ns, params=sim.config.mq)
        for v in vchannels:
            self.dispatcher.add_target(v)
        self._wake = sim.env.event()
        # Woken by time ticks only: a pack closes only on a tick, so a DML message alone would wake the
        # consumer for nothing (it waits in the pchannel and is read with the tick that closes its pack).
        broker.watch(pchannel, self._on_tick, msg_types=(MsgType.TIME_TICK,))

    def _on_tick(self, ch: str, msg_id: int) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def start(self) -> None:
        """Start consuming."""
        self.process(self.run())

    def run(self):
        """Wake when a time tick is appended to the pchannel, then take every complete pack."""
        env, rec = self.sim.env, self.sim.recorder
        emit_consume = rec.emitter("mq.consume", "ts", "channel", "vchannel", "msg_id", "msg_type", "tick_ts")
        while True:
            yield self._wake
            self._wake = env.event()
            yield env.timeout(self.sim.one_way("mq"))
            pchannel = self.pchannel
            for packs in self.dispatcher.poll_all():
                for vch in sorted(packs):
                    pack = packs[vch]
                    end_ts, dml = pack.end_ts, []
                    for m in pack.msgs:  # a loop: a comprehension's frame costs more than a pack's few messages
                        if m.msg_type in _DML_TYPES:
                            dml.append((m.end_ts(), pchannel, vch, m.position.msg_id, m.msg_type, end_ts))
                    emit_consume.rows(self.name, dml)
                    end = pack.end_positions[0] if pack.end_positions else None
                    rec.emit("mq.pack", self.name, channel=self.pchannel, vchannel=vch,
                             msg_id=end.msg_id if end is not None else None, begin_ts=pack.begin_ts,
                             end_ts=pack.end_ts, tick_ts=pack.end_ts,
                             count=len(dml))
