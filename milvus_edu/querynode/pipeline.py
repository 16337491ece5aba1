"""A QueryNode's pipeline per vchannel: filterNode -> insertNode -> deleteNode, the last publishing tsafe.

Models ``internal/querynodev2/pipeline/`` of Milvus 2.5:

* ``filter_node.go`` (``filterNode.Operate``): the pack's time range is ``(BeginTs, EndTs]``; an insert or delete
  is kept only if it is aligned, carries timestamps and belongs to the collection (``filter_policy.go``), and an
  insert also only if ``VerifyExcludedSegments(segment, EndTs)``; then ``TryCleanExcludedSegments(pack.EndTs)``.
* ``insert_node.go`` (``insertNode.Operate``): inserts sorted by ``BeginTs``, grouped per segment
  (``addInsertData``), then ``ProcessInsert``.
* ``delete_node.go`` (``deleteNode.Operate``): deletes grouped per partition, ``ProcessDelete`` with the pack's
  max ts, then ``UpdateTSafe(timeRange.timestampMax)`` for every pack, an empty one too. Publishing tsafe
  *after* the deletes is what lets a read at that tsafe trust that every delete up to it is applied.

Bug switch ``update_tsafe_before_delete``: the deleteNode publishes tsafe first and applies the pack's deletes
after. A read that wakes in between reads at the new tsafe a row whose delete is at or below it: the MVCC
checker reports it ("Then the read returned K, deleted at ...").

The nodes run one after another on one pack, as in Go: the QueryNode's pipeline (``internal/util/pipeline``) hands
each pack to ``pipeline.process``, which calls every node's ``Operate`` in turn in the stream's one goroutine
(``stream_pipeline.go``, ``pipeline.go``); a pack is never split. An insert with a wrong collection, no timestamps
or misaligned rows is dropped as in Go (the simulated proxies never send one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..proto import MsgType
from .delegator import ShardDelegator
from .segcore import Row


@dataclass(frozen=True)
class TimeRange:
    """``TimeRange``: the pack's ``(timestampMin, timestampMax]``."""

    timestamp_min: int
    timestamp_max: int


@dataclass
class InsertNodeMsg:
    """``insertNodeMsg``: what the filterNode kept, plus what it dropped and why (for the run log)."""

    insert_msgs: list = field(default_factory=list)
    delete_msgs: list = field(default_factory=list)
    time_range: TimeRange = TimeRange(0, 0)
    dropped: list = field(default_factory=list)  # (msg, reason)
    cleaned: list[int] = field(default_factory=list)


@dataclass(slots=True)
class PackResult:
    """What one pack did to the delegator: rows inserted per segment, deletes applied, tsafe, and drops (not
    frozen: one is built per pack, and a frozen dataclass's ``__init__`` costs several times a plain one's)."""

    time_range: TimeRange
    inserted: dict
    deletes: int
    hidden: int
    tsafe_before: int
    tsafe: int
    dropped: tuple
    cleaned: tuple[int, ...]


def _aligned(msg) -> bool:
    """``CheckAligned``: as many timestamps as primary keys."""
    return len(msg.timestamps) == len(msg.pks)


class FilterNode:
    """``filterNode`` of one vchannel."""

    def __init__(self, collection_id: int, channel: str, delegator: ShardDelegator):
        self.collection_id = collection_id
        self.channel = channel
        self.delegator = delegator

    def filtrate(self, msg) -> str | None:
        """The reason ``msg`` is dropped (Go's error text), or None when it passes."""
        if not _aligned(msg):
            return "the length of timestamps does not match the primary keys"
        if len(msg.timestamps) <= 0:
            return "the length of timestamp field is 0"
        if msg.collection_id != self.collection_id:
            return "msg not target because of collection"
        if msg.msg_type == MsgType.INSERT and not self.delegator.verify_excluded_segments(msg.segment_id, msg.end_ts()):
            return f"skip msg due to segment={msg.segment_id} has been excluded"
        return None

    def operate(self, pack) -> InsertNodeMsg:
        """``Operate``: keep the pack's inserts and deletes that pass, then try to clean old exclusions."""
        out = InsertNodeMsg(time_range=TimeRange(pack.begin_ts, pack.end_ts))
        for msg in pack.msgs:
            if msg.msg_type not in (MsgType.INSERT, MsgType.DELETE):
                continue  # the dispatcher hands DDL messages on too; Go logs "msgType is Insert or Delete"
            reason = self.filtrate(msg)
            if reason is not None:
                out.dropped.append((msg, reason))
            elif msg.msg_type == MsgType.INSERT:
                out.insert_msgs.append(msg)
            else:
                out.delete_msgs.append(msg)
        out.cleaned = self.delegator.try_clean_excluded_segments(pack.end_ts)
        return out


class InsertNode:
    """``insertNode``: rows into growing segments."""

    def __init__(self, delegator: ShardDelegator):
        self.delegator = delegator

    def operate(self, msg: InsertNodeMsg) -> dict:
        """``Operate``: sort the inserts by ``BeginTs``, group rows per segment, ``ProcessInsert``; returns rows
        taken per segment (a segment refused as excluded reads 0)."""
        by_segment: dict[int, list[Row]] = {}
        for m in sorted(msg.insert_msgs, key=lambda m: m.begin_ts()):
            batch = by_segment.setdefault(m.segment_id, [])
            if m.fields is None:
                batch.extend(Row(pk, ts) for pk, ts in zip(m.pks, m.timestamps))
            else:
                batch.extend(Row(pk, ts, fields=f) for pk, ts, f in zip(m.pks, m.timestamps, m.fields))
        return {seg: (len(rows) if self.delegator.insert(seg, rows) else 0) for seg, rows in by_segment.items()}


class DeleteNode:
    """``deleteNode``: deletes applied, then tsafe published (``update_tsafe_before_delete`` swaps the two)."""

    def __init__(self, delegator: ShardDelegator, update_tsafe_before_delete: bool = False):
        self.delegator = delegator
        self.update_tsafe_before_delete = update_tsafe_before_delete

    def apply_deletes(self, msg: InsertNodeMsg) -> tuple[int, int]:
        """``ProcessDelete`` of the pack's deletes (in pack order); returns (keys, rows newly hidden)."""
        pks, tss = [], []
        for m in msg.delete_msgs:
            pks.extend(m.pks)
            tss.extend(m.timestamps)
        if not pks:
            return 0, 0
        return len(pks), self.delegator.process_delete(pks, tss)

    def publish(self, msg: InsertNodeMsg) -> bool:
        """``UpdateTSafe(timeRange.timestampMax)``; whether tsafe moved."""
        return self.delegator.update_tsafe(msg.time_range.timestamp_max)


class Pipeline:
    """``NewPipeLine``: filterNode -> insertNode -> deleteNode for one vchannel of one collection."""

    def __init__(self, collection_id: int, vchannel: str, delegator: ShardDelegator,
                 update_tsafe_before_delete: bool = False):
        self.vchannel = vchannel
        self.delegator = delegator
        self.filter_node = FilterNode(collection_id, vchannel, delegator)
        self.insert_node = InsertNode(delegator)
        self.delete_node = DeleteNode(delegator, update_tsafe_before_delete)

    def operate(self, pack) -> PackResult:
        """Run one pack through the three nodes (all at once; see :meth:`operate_steps` for the switch's gap)."""
        steps = self.operate_steps(pack)
        for _ in steps:
            pass
        return self._result

    def operate_steps(self, pack):
        """The pack through the nodes as a generator that yields once between publishing tsafe and applying the
        deletes when ``update_tsafe_before_delete`` is on (the window a waiting read can fall into); the result is
        in :attr:`last_result` when it is exhausted."""
        d = self.delegator
        before = d.get_tsafe()
        msg = self.filter_node.operate(pack)
        inserted = self.insert_node.operate(msg)
        if self.delete_node.update_tsafe_before_delete:
            self.delete_node.publish(msg)
            yield "tsafe published before deletes"
            keys, hidden = self.delete_node.apply_deletes(msg)
        else:
            keys, hidden = self.delete_node.apply_deletes(msg)
            self.delete_node.publish(msg)
        self._result = PackResult(msg.time_range, inserted, keys, hidden, before, d.get_tsafe(),
                                  tuple(msg.dropped), tuple(msg.cleaned))

    @property
    def last_result(self) -> PackResult:
        """The :class:`PackResult` of the last pack :meth:`operate_steps` finished."""
        return self._result
