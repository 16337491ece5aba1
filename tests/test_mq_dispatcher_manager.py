"""The dispatcher manager of one pchannel: a main dispatcher, deputies for later vchannels, merging (reference §3.5).

Ports Milvus 2.5's ``pkg/mq/msgdispatcher/manager_test.go`` (TestManager "test add and remove dispatcher" and
the merge half of "test merge and split") onto :class:`DispatcherManager`, and checks through the simulator's
glue (:class:`~milvus_edu.cluster.consumer.PackConsumer`) that a vchannel registered after its pchannel's
dispatcher has read past the vchannel's position still gets every message that follows that position.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.clock import ManualClock
from milvus_edu.cluster.consumer import PackConsumer
from milvus_edu.cluster.node import Node
from milvus_edu.config import Config, MQParams
from milvus_edu.events import MemorySink, Recorder
from milvus_edu.mq import Broker, DispatcherManager, InsertMsg, TimeTickMsg, get_collection_id_from_vchannel
from milvus_edu.proto import MsgPosition
from milvus_edu.sim import Simulation
from milvus_edu.sim.kernel import NodeClock

NO_PURSUIT = MQParams(enable_pursuit_mode=False)
PCHANNEL = "by-dev-rootcoord-dml_0"
V1, V2, V3 = (f"{PCHANNEL}_{c}v0" for c in (101, 102, 103))


def insert(vchannel: str, ts: int, msg_id: int) -> InsertMsg:
    return InsertMsg(msg_id=msg_id, shard_name=vchannel, collection_id=get_collection_id_from_vchannel(vchannel),
                     partition_id=1, segment_id=1, pks=(msg_id,), timestamps=(ts,))


def position_before(broker: Broker, ts: int) -> MsgPosition:
    """A position at the pchannel's next message, stamped ``ts`` (what a collection's start position is)."""
    return MsgPosition(PCHANNEL, broker.next_msg_id(PCHANNEL), ts)


def new_manager(broker: Broker) -> DispatcherManager:
    broker.create_channel(PCHANNEL)
    return DispatcherManager(broker, PCHANNEL, now_ns=ManualClock(), params=NO_PURSUIT)


def drain(manager: DispatcherManager) -> dict[str, list[tuple[int, tuple[int, ...]]]]:
    """Every pack now ready, per vchannel: ``(end_ts, pks)``."""
    got: dict[str, list] = {}
    while (packs := manager.poll()) is not None:
        for vchannel, pack in packs.items():
            got.setdefault(vchannel, []).append((pack.end_ts, tuple(m.pks[0] for m in pack.msgs)))
    return got


def test_the_first_vchannel_gets_the_main_dispatcher_and_later_ones_deputies():
    broker = Broker()
    manager = new_manager(broker)
    manager.add(V1, position_before(broker, 5))
    manager.add(V2, position_before(broker, 6))
    assert manager.num_target() == 2
    assert manager.num_consumer() == 2
    assert [t.vchannel for t in manager.main.get_targets()] == [V1]
    assert [[t.vchannel for t in d.get_targets()] for d in manager.deputies.values()] == [[V2]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_add_and_remove_keep_the_target_count(seed):
    """Ports TestManager "test add and remove dispatcher": 30 rounds of adding 1-5 vchannels and removing
    some of the newest, with ticks flowing; ``NumTarget`` follows, and no dispatcher outlives its targets
    but the main one (quirk P34)."""
    rng = random.Random(seed)
    broker = Broker()
    manager = new_manager(broker)
    ts, offset = 0, 0
    for _ in range(30):
        for _ in range(rng.randint(1, 5)):
            offset += 1
            manager.add(f"{PCHANNEL}_vchannelv{offset}")
        assert manager.num_target() == offset
        for _ in range(rng.randrange(offset)):
            assert manager.remove(f"{PCHANNEL}_vchannelv{offset}")
            offset -= 1
        assert manager.num_target() == offset
        ts += 1
        broker.produce(PCHANNEL, TimeTickMsg(timestamp=ts))
        drain(manager)
        served = sum(d.target_num() for d in manager.dispatchers())
        assert served == offset
        assert manager.num_consumer() <= offset + 1


def test_three_vchannels_from_the_earliest_merge_into_one_dispatcher():
    """Ports TestManager "test merge and split" up to the merge (a split needs a send timeout, not modelled)."""
    broker = Broker()
    manager = new_manager(broker)
    for i in range(3):
        manager.add(f"{PCHANNEL}_vchannel-{i}", None)
    assert manager.num_target() == 3 and manager.num_consumer() == 3
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=1))
    drain(manager)
    assert manager.num_consumer() == 1
    assert sorted(t.vchannel for t in manager.main.get_targets()) == [f"{PCHANNEL}_vchannel-{i}" for i in range(3)]


def test_registering_a_vchannel_twice_is_refused_with_gos_text():
    manager = new_manager(Broker())
    manager.add(V1)
    with pytest.raises(ValueError, match=f"vchannel {V1} already exists in the dispatcher"):
        manager.add(V1)


def test_a_late_vchannel_gets_what_follows_its_position_then_its_deputy_merges_into_the_main():
    broker = Broker()
    manager = new_manager(broker)
    start2 = position_before(broker, 5)
    broker.produce(PCHANNEL, insert(V1, 10, 1))
    broker.produce(PCHANNEL, insert(V2, 12, 2))
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=20))
    manager.add(V1, None)
    assert drain(manager) == {V1: [(20, (1,))]}
    assert manager.main.cur_ts == 20
    # V2 registers now, at a position the main dispatcher has read past: a deputy seeks there. Its seek
    # ends at tick 20 (the first at or after the position), which Seek consumes, so its first pack waits
    # for the next tick.
    manager.add(V2, start2)
    assert manager.num_consumer() == 2
    assert drain(manager) == {}
    broker.produce(PCHANNEL, insert(V2, 25, 3))
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=30))
    assert drain(manager) == {V1: [(30, ())], V2: [(30, (2, 3))]}
    assert manager.num_consumer() == 1  # both delivered tick 30: merged
    assert sorted(t.vchannel for t in manager.main.get_targets()) == [V1, V2]
    broker.produce(PCHANNEL, insert(V2, 35, 4))
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=40))
    assert drain(manager) == {V1: [(40, ())], V2: [(40, (4,))]}


def test_a_deputy_is_not_merged_until_it_delivered_the_mains_tick():
    broker = Broker()
    manager = new_manager(broker)
    manager.add(V1, None)
    start2 = position_before(broker, 5)
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=10))
    assert drain(manager) == {V1: [(10, ())]}
    manager.add(V2, start2)
    deputy = next(iter(manager.deputies.values()))
    assert manager.try_merge() == []  # the deputy delivered nothing yet: CurTs 0 != 10
    assert drain(manager) == {}
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=20))
    assert drain(manager) == {V1: [(20, ())], V2: [(20, ())]}
    assert deputy.cur_ts == 20 and manager.deputies == {}


def test_removing_targets_stops_empty_deputies_and_the_main_only_when_it_empties_last():
    broker = Broker()
    manager = new_manager(broker)
    for v in (V1, V2, V3):
        manager.add(v)
    assert manager.num_consumer() == 3
    assert manager.remove(V2)
    assert manager.num_consumer() == 2  # V2's deputy had no other target
    assert not manager.remove(V2)  # not registered any more: Go only logs
    assert manager.remove(V3)
    assert manager.remove(V1)  # the main's last target, and no deputy left: the main stops too
    assert manager.main is None and manager.num_consumer() == 0 and manager.num_target() == 0


def test_a_main_emptied_while_deputies_run_keeps_running_without_targets():
    """Go checks the main dispatcher only when the removed target is its own, so once its last target went
    while a deputy ran, it stays after the deputy is gone."""
    broker = Broker()
    manager = new_manager(broker)
    manager.add(V1)
    manager.add(V2)
    assert manager.remove(V1)
    assert manager.main is not None and manager.main.target_num() == 0
    assert manager.remove(V2)
    assert manager.main is not None and manager.num_consumer() == 1 and manager.num_target() == 0
    manager.add(V3)  # there is a main: the new vchannel gets a deputy
    assert [[t.vchannel for t in d.get_targets()] for d in manager.deputies.values()] == [[V3]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([V1, V2, V3]), st.booleans()), min_size=1, max_size=40),
       st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=2, unique=True))
def test_every_vchannel_gets_exactly_the_messages_after_its_position(ops, later):
    """Whenever a vchannel registers (after any number of messages and ticks, drained or not), it receives
    every one of its messages produced after its position, once, and nothing from before. The first
    vchannel registers before anything is produced, from the earliest message."""
    joins = [0, *later]
    broker = Broker()
    manager = new_manager(broker)
    vchannels = [V1, V2, V3][:len(joins)]
    ts, joined, expected, got = 0, set(), {v: [] for v in vchannels}, {v: [] for v in vchannels}

    def join_at(step: int) -> None:
        for v, at in zip(vchannels, joins):
            if at == step or (step == len(ops) and at > step):
                manager.add(v, position_before(broker, ts) if joined else None)
                joined.add(v)

    def take() -> None:
        for v, packs in drain(manager).items():
            got[v].extend(pk for _, pks in packs for pk in pks)

    for step, (vchannel, tick) in enumerate(ops):
        join_at(step)
        ts += 1
        if tick:
            broker.produce(PCHANNEL, TimeTickMsg(timestamp=ts))
        else:
            broker.produce(PCHANNEL, insert(vchannel, ts, ts))
            if vchannel in joined:
                expected[vchannel].append(ts)
        if step % 3 == 0:
            take()
    join_at(len(ops))
    # two closing ticks: a late deputy's seek consumes the first tick after its position
    for _ in range(2):
        ts += 1
        broker.produce(PCHANNEL, TimeTickMsg(timestamp=ts))
        take()
    assert got == expected
    assert manager.num_consumer() == 1  # every deputy caught up and merged


class _Reader(PackConsumer, Node):
    """The smallest node that reads pchannels through the simulator's glue and records what it gets."""

    def __init__(self, sim: Simulation, broker: Broker):
        super().__init__(sim, "reader")
        self.broker = broker
        self.clock = NodeClock(sim.env)
        self.reset_consumer()
        self.got: dict[str, list[int]] = {}

    def on_pack(self, vchannel, pack):
        self.got.setdefault(vchannel, []).extend(m.pks[0] for m in pack.msgs)


def test_a_node_subscribing_a_vchannel_late_still_reads_its_messages_from_its_position():
    """Before the manager, a later vchannel joined the running dispatcher and lost what it had read past."""
    sim = Simulation(1, Recorder("manager", sinks=[MemorySink()]), Config(mq=NO_PURSUIT))
    broker = Broker()
    broker.create_channel(PCHANNEL)
    reader = _Reader(sim, broker)
    start2 = position_before(broker, 5)
    broker.produce(PCHANNEL, insert(V1, 10, 1))
    broker.produce(PCHANNEL, insert(V2, 12, 2))
    reader.subscribe(PCHANNEL, V1, None)
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=20))
    sim.env.run(until=50)
    assert reader.got == {V1: [1]}
    reader.subscribe(PCHANNEL, V2, start2)
    broker.produce(PCHANNEL, TimeTickMsg(timestamp=30))  # the deputy's seek consumed tick 20
    sim.env.run(until=100)
    assert reader.got == {V1: [1], V2: [2]}
    assert reader.dispatchers[PCHANNEL].num_consumer() == 1
