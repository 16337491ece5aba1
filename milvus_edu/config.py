"""Milvus parameters and bug switches, as plain dataclasses.

Every constant that Milvus makes configurable is a field here with its Milvus key in a comment and
Milvus 2.5's default. Bug switches swap one faithful rule for a tempting wrong one, so that a lab can
show why the rule exists; they are off by default and recorded in every run's metadata.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace

MS = 1_000_000  # nanoseconds per millisecond
S = 1000 * MS
PCHAN_STATS = ("scan", "heap")  # TimeTickParams.pchan_stats: milvus_edu.proxy.task_scheduler.STATS_IMPLEMENTATIONS
PHASE_DRAWN = -1.0  # a TimeTickParams phase of -1: drawn from the run's seed


class _Positive:
    """Mixin: every number field of a parameter group must be positive (intervals, sizes, counts, ratios),
    except those a group names in ``_NOT_POSITIVE`` (it checks them itself)."""

    _NOT_POSITIVE: tuple[str, ...] = ()

    def __post_init__(self):
        for f in fields(self):
            if f.name in self._NOT_POSITIVE:
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if value <= 0:
                raise ValueError(f"{type(self).__name__}.{f.name} must be positive, got {value}")


@dataclass(frozen=True)
class TSOParams(_Positive):
    """Constants of ``internal/tso`` and the rootcoord/session code around it (all in nanoseconds)."""

    update_timestamp_step_ns: int = 50 * MS  # tso.UpdateTimestampStep (tsLoop period, overflow retry sleep)
    update_timestamp_guard_ns: int = 1 * MS  # tso.updateTimestampGuard
    max_logical: int = 1 << 18  # tso.maxLogical
    save_interval_ns: int = 3 * S  # GlobalTSOAllocator saveInterval (hard-coded)
    max_reset_ts_gap_ns: int = 3 * S  # GlobalTSOAllocator maxResetTSGap (hard-coded)
    generate_max_retry: int = 10  # GenerateTSO maxRetryCount
    not_initialised_sleep_ns: int = 200 * MS  # GenerateTSO sleep when TSO is not initialised
    limit_max_logic: bool = True  # GlobalTSOAllocator.LimitMaxLogic
    session_ttl_ns: int = 60 * S  # common.session.ttl (2.5 default: 60 s)
    standby_retry_ns: int = 100 * MS  # ProcessActiveStandBy retry after an etcd error
    lease_check_ns: int = 500 * MS  # etcd lessor: expired leases are revoked every 500 ms


@dataclass(frozen=True)
class TimeTickParams(_Positive):
    """Constants of the proxy DML queue, the proxy ticker and rootcoord's timetick sync (times in ns)."""

    time_tick_interval_ns: int = 200 * MS  # proxy.timeTickInterval (proxy report loop, rootcoord DDL tick loop)
    tt_msg_enabled: bool = True  # common.ttMsgEnabled
    max_task_num: int = 1024  # proxy.maxTaskNum (unissued DML tasks per proxy)
    dml_channel_num: int = 16  # rootCoord.dmlChannelNum
    cluster_prefix: str = "by-dev"  # msgChannel.chanNamePrefix.cluster
    root_coord_dml: str = "rootcoord-dml"  # msgChannel.chanNamePrefix.rootCoordDml
    time_tick_sync_tt_interval_ns: int = 120 * S  # rootcoord timeTickSyncTtInterval (const): "no round" warning
    ticker_fixed_interval_unit: bool = False
    """Not a Milvus key: False reproduces 2.5's proxy ticker, which adds ``TimeTickInterval`` as raw
    nanoseconds to a hybrid timestamp (quirk 4); True adds 200 ms to the physical part instead."""
    pchan_stats: str = "scan"
    """Not a Milvus key: how the proxy's DML queue finds a pchannel's minTs when a task finishes. ``scan`` is
    Go's ``popPChanStats`` (a rescan of the pchannel's ts set, O(n)); ``heap`` is the design documents' proposal (book/seeds.md), a
    min-heap with lazy deletion (O(log n) amortised). Both give the same statistics, so the same run log."""
    sync_ts_phase_ms: float = PHASE_DRAWN
    """Not a Milvus key: how long before each tick of rootcoord's ``startTimeTickLoop`` the scheduler's
    ``syncTsLoop`` ticks, i.e. the age of the DDL minimum when it is sent (0 to below the interval). In Milvus
    the two loops have tickers of their own, whose grids are fixed when each is created. -1 (the default)
    draws it from the run's seed."""
    proxy_ticker_phase_ms: float = PHASE_DRAWN
    """Not a Milvus key: how long after ``channelsTimeTickerImpl.start`` a proxy's ``tickLoop`` ticker starts
    its grid (0 to below ``proxy.timeTickInterval / 2``). -1 (the default): each proxy draws its own from the seed."""
    proxy_report_phase_ms: float = PHASE_DRAWN
    """Not a Milvus key: how long after ``channelsTimeTickerImpl.start`` a proxy's ``sendChannelsTimeTickLoop``
    ticker starts its grid (0 to below the interval). -1 (the default): each proxy draws its own from the seed."""

    _NOT_POSITIVE = ("sync_ts_phase_ms", "proxy_ticker_phase_ms", "proxy_report_phase_ms")

    def __post_init__(self):
        super().__post_init__()
        if self.pchan_stats not in PCHAN_STATS:
            raise ValueError(f"TimeTickParams.pchan_stats must be one of {', '.join(PCHAN_STATS)}, "
                             f"got {self.pchan_stats!r}")
        interval_ms = self.time_tick_interval_ns / MS
        for name, period in (("sync_ts_phase_ms", interval_ms), ("proxy_ticker_phase_ms", interval_ms / 2),
                             ("proxy_report_phase_ms", interval_ms)):
            value = getattr(self, name)
            if value != PHASE_DRAWN and not 0 <= value < period:
                raise ValueError(f"TimeTickParams.{name} must be -1 (drawn from the seed) or at least 0 and below "
                                 f"{period:g} ms (its loop's period), got {value:g}")

    @property
    def ticker_interval_ns(self) -> int:
        """The proxy's channelsTimeTicker period: ``proxy.timeTickInterval / 2`` (100 ms)."""
        return self.time_tick_interval_ns // 2


@dataclass(frozen=True)
class MQParams(_Positive):
    """Message-stream constants (``pkg/mq/msgstream``), times in ns."""

    enable_pursuit_mode: bool = True  # mq.enablePursuitMode
    pursuit_lag_ns: int = 10 * S  # mq.pursuitLag
    pursuit_buffer_size: int = 8388608  # mq.pursuitBufferSize (bytes)
    pursuit_buffer_time_ns: int = 60 * S  # mq.pursuitBufferTime
    consume_idle_timeout_ns: int = 3 * S  # consumeToTtMsg returns after 3 s without a message (hard-coded)


@dataclass(frozen=True)
class DataNodeParams(_Positive):
    """Constants of the DataNode's flowgraph, write buffer, sync manager and checkpoint updater (times in ns)."""

    update_channel_checkpoint_interval_ns: int = 60 * S  # dataNode.channel.updateChannelCheckpointInterval
    channel_checkpoint_update_tick_ns: int = 10 * S  # dataNode.channel.channelCheckpointUpdateTickInSeconds
    max_channel_checkpoints_per_rpc: int = 128  # dataNode.channel.maxChannelCheckpointsPerPRC (sic)
    update_channel_checkpoint_max_parallel: int = 10  # dataNode.channel.updateChannelCheckpointMaxParallel
    update_channel_checkpoint_rpc_timeout_ns: int = 20 * S  # dataNode.channel.updateChannelCheckpointRPCTimeout
    sync_period_ns: int = 600 * S  # dataNode.segment.syncPeriod (stale buffer; plus a jitter below 10 %)
    insert_buf_size: int = 16777216  # dataNode.segment.insertBufSize (bytes)
    delete_buf_bytes: int = 16777216  # dataNode.segment.deleteBufBytes
    binlog_max_size: int = 67108864  # dataNode.segment.binlog.maxsize
    force_sync_enable: bool = True  # dataNode.memory.forceSyncEnable
    force_sync_segment_num: int = 1  # dataNode.memory.forceSyncSegmentNum
    memory_check_interval_ns: int = 3000 * MS  # dataNode.memory.checkInterval
    force_sync_watermark: float = 0.5  # dataNode.memory.forceSyncWatermark (0.2 in standalone mode)
    flowgraph_max_queue_length: int = 16  # dataNode.dataSync.flowGraph.maxQueueLength
    max_parallel_sync_mgr_tasks: int = 256  # dataNode.dataSync.maxParallelSyncMgrTasks
    skip_mode_enable: bool = True  # dataNode.dataSync.skipMode.enable
    skip_mode_skip_num: int = 4  # dataNode.dataSync.skipMode.skipNum
    skip_mode_cold_time_ns: int = 60 * S  # dataNode.dataSync.skipMode.coldTime
    skip_bf_stats_load: bool = True  # dataNode.skip.BFStats.Load
    timetick_interval_ns: int = 500 * MS  # dataNode.timetick.interval (segment statistics to DataCoord)


@dataclass(frozen=True)
class QueryParams(_Positive):
    """The read path's constants: proxy, shard delegator, QueryCoord (``internal/proxy``, ``internal/querynodev2``)."""

    graceful_time_ms: int = 5000  # common.gracefulTime: how stale a Bounded read may be
    max_timestamp_lag_ns: int = 86400 * S  # queryNode.scheduler.maxTimestampLag: a farther guarantee fails at once
    downgrade_tsafe: bool = False  # queryNode.downgradeTsafe: serve below the guarantee instead of waiting
    clean_exclude_segment_interval_ns: int = 60 * S  # queryCoord.cleanExcludeSegmentInterval


@dataclass(frozen=True)
class BugSwitches:
    """Named wrong rules a learner may switch on. Each is caught by the checker of the lesson that teaches it
    (``milvus_edu/mechanisms/<lesson>/check.py``); the components of the shared cluster read them."""

    tso_skip_load_on_init: bool = False
    """InitTimestamp ignores the saved window and starts from its own clock (timestamps go back after a
    failover to a node whose clock is behind)."""
    tso_no_window_save: bool = False
    """UpdateTimestamp never re-saves the window, so the physical part runs past what the KV promises
    (a new active resumes below timestamps already handed out)."""
    allocate_outside_enqueue_lock: bool = False
    """The proxy allocates a DML task's timestamp before taking the enqueue lock, so a task with a smaller
    timestamp can enter the pchannel statistics after a larger one was reported (the design documents' six steps, book/seeds.md):
    rootcoord promises a time tick that a later message breaks."""
    reset_flush_ts_inclusive: bool = False
    """The DataNode clears a channel's flushTs when the stored checkpoint *reaches* it (``>=``) instead of
    passing it (``>``): a flush is declared complete on a checkpoint equal to flushTs. Alone it changes no answer
    a client gets (quirk P23); with ``checkpoint_ignores_syncing_segments`` (the design documents' older
    GetCheckpoint) the flush is declared done while its syncs still run (``flush-durable``)."""
    checkpoint_ignores_syncing_segments: bool = False
    """The write buffer's checkpoint ignores segments whose sync is still running, so the channel checkpoint
    jumps past rows that are not in a binlog yet: a crash then loses them."""
    skip_recovery_filter: bool = False
    """The ddNode does not drop replayed inserts that are already in binlogs after a restart: the rows
    between a segment's DmlPosition and the channel checkpoint are written twice."""
    drop_failed_checkpoint_tasks: bool = False
    """The checkpoint updater deletes a channel's task when its RPC fails instead of keeping it for the
    next tick: the update is lost until the ttNode submits again, up to a minute later."""

    update_tsafe_before_delete: bool = False
    """The QueryNode's deleteNode publishes tsafe before it applies the pack's deletes: a read woken in between
    reads at the new tsafe and still sees rows deleted at or below it."""
    skip_wait_tsafe: bool = False
    """The shard delegator serves a read at once at its current tsafe instead of waiting for the guarantee: a Strong
    read misses writes acknowledged before it began."""
    delete_ignores_timestamps: bool = False
    """Segcore applies a delete to every row of its key, whatever their timestamps: a read at an earlier timestamp,
    or a row inserted again after the delete, loses rows it must see."""
    session_uses_zero_ts: bool = False
    """The SDK sends 0 as a Session read's guarantee instead of the client's last write timestamp: the QueryNode does
    not wait, and the client may not read its own write."""

    def enabled(self) -> list[str]:
        """Names of the switches that are on."""
        return [f.name for f in fields(self) if getattr(self, f.name)]

    @classmethod
    def names(cls) -> list[str]:
        """Every switch name."""
        return [f.name for f in fields(cls)]

    @classmethod
    def from_names(cls, names) -> "BugSwitches":
        """Switches with the named ones on; ``ValueError`` names the valid ones otherwise."""
        known = set(cls.names())
        bad = [n for n in names if n not in known]
        if bad:
            raise ValueError(f"unknown bug switch {bad[0]!r}{did_you_mean(bad[0], known)}; choose from "
                             f"{', '.join(sorted(known))}")
        return cls(**{n: True for n in names})


@dataclass(frozen=True)
class Config:
    """Everything a component needs to know about the cluster's parameters."""

    tso: TSOParams = field(default_factory=TSOParams)
    timetick: TimeTickParams = field(default_factory=TimeTickParams)
    mq: MQParams = field(default_factory=MQParams)
    datanode: DataNodeParams = field(default_factory=DataNodeParams)
    query: QueryParams = field(default_factory=QueryParams)
    switches: BugSwitches = field(default_factory=BugSwitches)

    def to_dict(self) -> dict:
        """A JSON-ready dict (recorded in run metadata)."""
        return asdict(self)

    def changed_params(self) -> dict[str, object]:
        """The parameters that differ from Milvus's defaults, by dotted name (what :meth:`with_params` takes back),
        in the order of the groups and their fields; ``{}`` for a default config. The switches are not parameters."""
        now, default = self.to_dict(), Config().to_dict()
        return {f"{group}.{name}": value for group, values in now.items() if group != "switches"
                for name, value in values.items() if default[group][name] != value}

    def with_params(self, params: dict[str, object]) -> "Config":
        """A copy with parameters overridden by dotted name, e.g. ``{"timetick.time_tick_interval_ns": 100_000_000}``.

        Values may be strings (from the command line): they are converted to the field's type.
        ``ValueError`` for an unknown group or name (naming the valid ones), a value of the wrong type,
        or a value out of range (every interval, size and count must be positive; whole numbers must fit Go's int64).
        """
        if not isinstance(params, Mapping):
            raise ValueError(f"params are a dict of dotted name to value, e.g. {{'timetick.time_tick_interval_ns': "
                             f"100000000}}; got {type(params).__name__}")
        groups = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "switches"}
        changes: dict[str, dict[str, object]] = {}
        for dotted, raw in params.items():
            group, _, name = str(dotted).partition(".")
            if group not in groups or not name:
                every = [f"{g}.{f.name}" for g, params_of in groups.items() for f in fields(params_of)]
                raise ValueError(f"unknown parameter {dotted!r}{did_you_mean(dotted, every)}; parameters are "
                                 f"<group>.<name> with group one of {', '.join(sorted(groups))}")
            known = {f.name: f for f in fields(groups[group])}
            if name not in known:
                raise ValueError(f"unknown parameter {dotted!r}{did_you_mean(dotted, [f'{group}.{k}' for k in known])}; {group} has "
                                 f"{', '.join(sorted(known))}")
            changes.setdefault(group, {})[name] = _convert(dotted, getattr(groups[group], name), raw)
        updated = {}
        for g, c in changes.items():
            try:
                updated[g] = replace(groups[g], **c)
            except ValueError as exc:  # name the parameter as the user wrote it
                bad = next(n for n in c if f".{n} " in str(exc))
                rule = str(exc).split(f".{bad} ", 1)[1]
                raise ValueError(f"parameter {g}.{bad} {rule}") from None
        return replace(self, **updated)


def did_you_mean(name, choices) -> str:
    """`` (did you mean 'x'?)`` naming the one of ``choices`` closest to a mistyped ``name``, or ``""`` when none is
    close: a typo's fix at a glance, before the full list of choices."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_flag(raw) -> bool | None:
    """A true/false value from Python or the command line (``true``/``false``, ``1``/``0``, ``yes``/``no``,
    ``on``/``off``, any case); ``None`` for anything else, which the caller refuses rather than reads as false."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    return None


def _convert(dotted: str, current, raw):
    """``raw`` as the type of ``current`` (bool, int or str); ``ValueError`` naming the parameter."""
    if isinstance(current, bool):
        flag = parse_flag(raw)
        if flag is None:
            raise ValueError(f"parameter {dotted} takes true or false, got {raw!r}")
        return flag
    if isinstance(current, float):
        try:
            return float(str(raw).replace("_", ""))
        except ValueError:
            raise ValueError(f"parameter {dotted} takes a number, got {raw!r}") from None
    if isinstance(current, int):
        if isinstance(raw, bool):
            raise ValueError(f"parameter {dotted} takes a whole number, got {raw!r}")
        try:
            value = int(str(raw).replace("_", ""))
        except ValueError:
            raise ValueError(f"parameter {dotted} takes a whole number, got {raw!r}") from None
        # Milvus reads these as Go int64s; a larger value would overflow a timestamp deep inside a run
        if not -2**63 <= value < 2**63:
            raise ValueError(f"parameter {dotted} must fit a 64-bit integer (below 2**63), got {raw!r}")
        return value
    return str(raw)
