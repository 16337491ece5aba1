"""The simulator's fast paths equal their readable forms.

Each shortcut taken for speed (issue 6, simulator speed) sits beside the readable code it replaces;
these tests run both and compare: the recorder's batches (rows, and checkers and summaries fed by
batch), the MQ's fast paths (``milvus_edu/mq/fast.py``: messages built with their position, which the
broker stores as they are, and a client's int64 keys hashed ahead with numpy), the
TimeTick collection's cached channel lookups, and AllocTimestamp answered without its step generators.
(The recorder's batch encoding is pinned in ``tests/test_recorder_fast.py``.)
``benchmarks/fast_path_gains.py`` measures what each is worth.
"""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu  # noqa: F401  (registers the mechanisms' kinds and scenarios)
from milvus_edu.config import BugSwitches, Config
from milvus_edu.events import MemorySink, Recorder, arrow_schema
from milvus_edu.cluster.dml import Collection
from milvus_edu.events.recorder import arrow_table, encode_detail, json_line
from milvus_edu.mq import (
    InsertMsg,
    TimeTickMsg,
    get_virtual_channel,
    to_physical_channel,
)
from milvus_edu.mq import fast, hash32_int64, hash_pk_2_channels, hash_string_2_uint32
from milvus_edu.mq.broker import Broker
from milvus_edu.proto import MsgPosition
from milvus_edu.registry import get_scenario, scenario_mechanisms, scenario_options
from milvus_edu.sim.kernel import Simulation


class BatchGrabber:
    """A batch sink that keeps every batch it is handed."""

    def __init__(self):
        self.batches = []

    def write_batch(self, batch) -> None:
        self.batches.append(batch)

    def close(self) -> None:
        pass


class RowByRow:
    """Hides a sink's ``write_batch``, so the recorder hands it each row as it is emitted."""

    def __init__(self, sink):
        self.write = sink.write
        self.close = sink.close
        self.kinds = getattr(sink, "kinds", None)


def _run(scenario: str, switches: list[str], until_ms: float, sinks: list, batch_rows: int = 1000) -> Recorder:
    spec = get_scenario(scenario)
    recorder = Recorder(f"{scenario}-s5", sinks=sinks, batch_rows=batch_rows)
    sim = Simulation(5, recorder, Config(switches=BugSwitches.from_names(switches)))
    spec.build(sim, **scenario_options(spec, None))
    recorder.emit("run.start", "sim", detail={"scenario": scenario, "switches": switches})
    sim.run(until_ms)
    recorder.emit("run.end", "sim", detail={"events": recorder.seq + 1})
    recorder.close()
    return recorder


RUNS = [
    ("tso-basics", [], 10_000.0),
    ("tso-failover", [], 80_000.0),
    ("timetick-basics", [], 2_000.0),
    pytest.param("timetick-unlocked-enqueue", ["allocate_outside_enqueue_lock"], 5_000.0,
                 marks=pytest.mark.slow),  # ~1.9 CPU s a test
]


@pytest.mark.parametrize("scenario,switches,until_ms", RUNS)
def test_batch_sinks_get_the_rows_row_sinks_get(scenario, switches, until_ms):
    """With only batch sinks the recorder builds no row dict; the rows its batches give, their JSON lines
    and their tables are those of a row sink."""
    memory, grabber = MemorySink(), BatchGrabber()
    _run(scenario, switches, until_ms, [grabber])
    _run(scenario, switches, until_ms, [memory])
    rows = [row for batch in grabber.batches for row in batch.rows()]
    assert rows == memory.rows
    for batch in grabber.batches:
        assert batch.json_lines() == "".join(json_line(row) + "\n" for row in batch.rows())
        assert batch.table().equals(arrow_table(batch.rows(), arrow_schema()))


@pytest.mark.slow
@pytest.mark.parametrize("scenario,switches,until_ms", RUNS)
def test_checkers_and_summaries_fed_by_batch_equal_those_fed_row_by_row(scenario, switches, until_ms):
    mechanisms = scenario_mechanisms(get_scenario(scenario))
    fast = [m.checker() for m in mechanisms] + [m.summary() for m in mechanisms]
    slow = [m.checker() for m in mechanisms] + [m.summary() for m in mechanisms]
    assert all(hasattr(sink, "write_batch") for sink in fast)
    recorder = _run(scenario, switches, until_ms, fast, batch_rows=777)
    _run(scenario, switches, until_ms, [RowByRow(sink) for sink in slow])
    for a, b in zip(fast[:len(mechanisms)], slow[:len(mechanisms)]):
        assert a.result() == b.result()
        assert a.counts == b.counts
    for a, b in zip(fast[len(mechanisms):], slow[len(mechanisms):]):
        assert a.sections(recorder.counts) == b.sections(recorder.counts)
    if switches:
        assert any(checker.result() for checker in fast[:len(mechanisms)])  # the switch breaks the watermark


def _batch_of(emits: list[tuple[str, str, dict]]):
    grabber = BatchGrabber()
    recorder = Recorder("details", sinks=[grabber], batch_rows=len(emits))
    for kind, node, fields in emits:
        recorder.emit(kind, node, **fields)
    recorder.close()
    (batch,) = grabber.batches
    return batch


def test_odd_details_are_recorded_as_encode_detail_of_their_dict():
    """Bools, None, floats (also whole and special ones), ints beyond 64 bits, non-ASCII and control
    characters, quotes, a key missing in some rows, other key sets, an int and a float under one key,
    an empty dict, nested values, non-str keys and texts: each detail is ``encode_detail`` of its dict."""
    details = [
        {"b": True, "a": None, "c": 1.5}, {"b": False, "a": None, "c": 50.0}, {"b": True, "a": None, "c": float("nan")},
        {"task": 1}, {"task": 1 << 70}, {"task": -5},
        {"x": "tab\there \u00e9 \"q\" \\"}, {"x": ""}, {"x": "plain"},
        {"k": 1, "m": 2}, {"k": 3}, {"m": 4, "k": 5},
        {"v": 1}, {"v": 2.5}, {},
        {"nested": {"z": [1, 2]}}, {1: "int key"}, "already text", None, {"f": -0.0}, {"f": 1e-7}, {"f": 1e16},
    ]
    emits = [("rpc.drop", "client-0", {"peer": "rootcoord-1", "detail": d}) for d in details]
    rows = _batch_of(emits).rows()
    expected = [encode_detail(d) if isinstance(d, dict) else d for d in details]
    assert [row["detail"] for row in rows] == expected
    batch = _batch_of(emits)
    assert batch.json_lines() == "".join(json_line(row) + "\n" for row in batch.rows())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c\u00e9"]),
                                st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                                max_size=3), min_size=1, max_size=6))
def test_flat_details_are_recorded_as_encode_detail_of_their_dict(details):
    batch = _batch_of([("rpc.drop", "client-0", {"detail": d}) for d in details])
    assert [row["detail"] for row in batch.rows()] == [encode_detail(d) for d in details]


def test_a_detail_changed_after_emit_is_recorded_as_it_was():
    grabber = BatchGrabber()
    recorder = Recorder("r", sinks=[grabber])
    detail = {"task": 1}
    recorder.emit("rpc.drop", "client-0", detail=detail)
    detail["task"] = 2
    recorder.close()
    assert grabber.batches[0].rows()[0]["detail"] == '{"task":1}'


def test_rows_of_kinds_are_in_order_and_shared_between_readers():
    batch = _batch_of([
        ("rpc.drop", "client-0", {"peer": "a"}),
        ("tso.save", "rootcoord-1", {"window_end_ms": 5, "clock_ms": 1}),
        ("rpc.drop", "client-1", {"peer": "b", "detail": {"leg": "request"}}),
        ("tso.save", "rootcoord-1", {"window_end_ms": 6, "clock_ms": 2}),
    ])
    drops = batch.rows({"rpc.drop"})
    assert [(row["seq"], row["node"], row["detail"]) for row in drops] == [(0, "client-0", None),
                                                                           (2, "client-1", '{"leg":"request"}')]
    assert [row["seq"] for row in batch.rows({"tso.save", "rpc.drop"})] == [0, 1, 2, 3]
    assert batch.rows({"rpc.drop"})[1] is drops[1]
    assert batch.rows(set()) == []


def test_the_broker_stamps_a_message_without_its_position_with_a_copy():
    msg = InsertMsg(shard_name="ch_1v0", collection_id=1, partition_id=2, segment_id=3, pks=(1, 2),
                    timestamps=(9, 9), msg_id=7, source_id=4)
    broker = Broker()
    assert broker.produce("ch", msg) == 1
    assert broker.get("ch", 1) == dataclasses.replace(msg, position=MsgPosition("ch", 1, 9))
    assert msg.position is None


def test_collection_caches_match_to_physical_channel_and_shard_order():
    pchannels = ["by-dev-rootcoord-dml_1", "by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"]
    vchannels = [get_virtual_channel(p, 100, i) for i, p in enumerate(pchannels)]
    collection = Collection(100, vchannels)
    assert collection.pchannel_of == {v: to_physical_channel(v) for v in vchannels}
    assert collection.pchannels == tuple(sorted({to_physical_channel(v) for v in vchannels}))
    assert [collection.segment_of(v) for v in vchannels] == [100_000, 100_001, 100_002]


def test_counts_are_events_per_kind_in_first_seen_order():
    recorder = Recorder("r")
    recorder.emit("rpc.drop", "client-0", peer="a")
    recorder.emit("tso.save", "rootcoord-1", window_end_ms=5, clock_ms=1)
    recorder.emit("rpc.drop", "client-0", detail={"leg": "request"})
    assert list(recorder.counts.items()) == [("rpc.drop", 2), ("tso.save", 1)]
    assert json.loads(json.dumps(recorder.counts)) == {"rpc.drop": 2, "tso.save": 1}


def test_batches_reuse_the_dicts_built_for_row_sinks():
    """With a row sink (notebooks keep rows in memory) the batch hands on the dicts built at emit."""
    memory, grabber = MemorySink(), BatchGrabber()
    _run("timetick-basics", [], 500.0, [memory, grabber], batch_rows=300)
    rows = [row for batch in grabber.batches for row in batch.rows()]
    assert len(rows) == len(memory.rows) > 300
    assert all(a is b for a, b in zip(rows, memory.rows))


# ---- the proxy's statsLock: no SimPy event when free, same order as a PriorityResource ----------------
def _grants(use_stats_lock: bool, requests: list[tuple[float, int, float]]) -> list[tuple[int, float]]:
    """(request index, time granted) in grant order, for requests ``(arrival, priority, hold)``."""
    import simpy

    from milvus_edu.cluster.dml import StatsLock

    env = simpy.Environment()
    lock = StatsLock(env) if use_stats_lock else simpy.PriorityResource(env, capacity=1)
    grants = []

    def task(i, arrival, priority, hold):
        yield env.timeout(arrival)
        if use_stats_lock:
            wait = lock.acquire(priority)
            if wait is not None:
                yield wait
            try:
                grants.append((i, env.now))
                yield env.timeout(hold)
            finally:
                lock.release()
        else:
            with lock.request(priority=priority) as held:
                yield held
                grants.append((i, env.now))
                yield env.timeout(hold)

    for i, (arrival, priority, hold) in enumerate(requests):
        env.process(task(i, arrival, priority, hold))
    env.run()
    return grants


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40).map(lambda t: t / 4), st.sampled_from([0, 1]),
                          st.integers(0, 12).map(lambda t: t / 4)), min_size=1, max_size=25))
def test_stats_lock_grants_like_a_priority_resource(requests):
    """Who gets the lock, and when, is the same as with ``simpy.PriorityResource(capacity=1)`` (readers,
    priority 0, before writers, then arrival order), ties in time included."""
    assert _grants(True, requests) == _grants(False, requests)


# ---------------------------------------------------------------------------------------------
# Messages and positions built without the frozen dataclass's per-field setattr.

_PKS = st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5)), min_size=0, max_size=6)


@settings(max_examples=200, deadline=None)
@given(_PKS, st.integers(0, 2**63 - 1), st.integers(0, 3), st.integers(0, 10**15), st.integers(0, 99),
       st.integers(0, 4096))
def test_new_insert_msg_equals_the_dataclass_constructor(pks, ts, extra_rows, msg_id, source_id, payload):
    from milvus_edu.mq.fast import new_insert_msg
    fields = dict(shard_name="by-dev-rootcoord-dml_0_100v0", collection_id=100, partition_id=1001,
                  segment_id=100000, pks=tuple(pks), timestamps=(ts,) * (len(pks) + (extra_rows == 3)),  # sometimes one too many
                  payload_bytes=payload, msg_id=msg_id, source_id=source_id)
    try:
        readable = InsertMsg(**fields)
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)[:30].replace("(", r"\(").replace(")", r"\)")):
            new_insert_msg(**fields)
        return
    fast = new_insert_msg(**fields)
    assert fast == readable and vars(fast) == vars(readable) and hash(fast) == hash(readable)
    assert (fast.begin_ts(), fast.end_ts(), fast.size(), fast.base) == (readable.begin_ts(), readable.end_ts(),
                                                                        readable.size(), readable.base)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.pks = ()


@given(st.text(max_size=30), st.integers(1, 2**40), st.integers(0, 2**63 - 1))
def test_a_position_built_fast_equals_the_dataclass(channel, msg_id, ts):
    from milvus_edu.mq.fast import new_msg_position

    fast, readable = new_msg_position(channel, msg_id, ts), MsgPosition(channel, msg_id, ts)
    assert fast == readable and vars(fast) == vars(readable) and hash(fast) == hash(readable)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.msg_id = 0


@pytest.mark.parametrize("change", [None, "channel_name", "msg_id", "timestamp", "msg_group"])
def test_the_broker_keeps_a_message_built_with_its_position_and_stamps_any_other(change):
    """A message that already carries the position the broker gives it is stored as it is; one whose
    position differs in any field is stored as a copy with the right position, as before."""
    from milvus_edu.mq.fast import new_insert_msg

    broker = Broker()
    broker.produce("ch", TimeTickMsg(timestamp=5, source_id=1))
    right = {"channel_name": "ch", "msg_id": broker.next_msg_id("ch"), "timestamp": 9, "msg_group": ""}
    wrong = {"channel_name": "other", "msg_id": 1, "timestamp": 8, "msg_group": "g"}
    fields = {**right, **({change: wrong[change]} if change else {})}
    msg = new_insert_msg("ch_1v0", 1, 2, 3, (1, 2), (9, 9), 0, 7, 4, MsgPosition(**fields))
    msg_id = broker.produce("ch", msg)
    stored = broker.get("ch", msg_id)
    assert (stored is msg) == (change is None)
    assert stored.position == MsgPosition("ch", 2, 9) and stored == dataclasses.replace(msg, position=stored.position)


# ---------------------------------------------------------------------------------------------
# murmur3 of int64 keys written out, and hashed ahead with numpy (mq/fast.py).

@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_an_int64_key_not_hashed_ahead_goes_to_the_shard_of_its_hash(pk):
    """A key missing from the table of keys hashed ahead is hashed by ``Hash32Int64`` itself."""
    fast.PREHASHED.clear()
    assert hash_pk_2_channels([pk], ["a", "b", "c"]) == [hash32_int64(pk) % 3]


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 9)), max_size=60), st.integers(1, 64))
def test_a_clients_keys_hashed_ahead_are_its_next_keys_with_their_own_hashes(inserts, block):
    """``KeysHashedAhead.keys`` gives the keys a client asks for, as a list, and every one of them is in the
    table with its own ``Hash32Int64`` when it is given back (a block hashed ahead of it, or again after the
    client's key range moved)."""
    fast.PREHASHED.clear()
    ahead, start = fast.KeysHashedAhead(block), 0
    for server, rows in inserts:
        base = server * 10**9
        keys = ahead.keys(base, start, rows)
        assert keys == list(range(base + start, base + start + rows))
        assert all(fast.PREHASHED.get(pk) == hash32_int64(pk) for pk in keys)
        start += rows


@given(st.lists(st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
                          st.integers(min_value=1 << 63, max_value=1 << 70)), max_size=300))
def test_keys_hashed_ahead_with_numpy_equal_the_readable_hash(pks):
    """``prehash_int64`` (numpy, many keys at once) gives ``Hash32Int64`` of every int64 key and skips others."""
    fast.PREHASHED.clear()
    fast.prehash_int64(pks)
    for pk in pks:
        if pk <= (1 << 63) - 1:
            assert fast.PREHASHED[pk] == hash32_int64(pk)
        else:
            assert pk not in fast.PREHASHED
    shards = [f"v{i}" for i in range(5)]
    ints = [pk for pk in pks if pk <= (1 << 63) - 1]
    assert hash_pk_2_channels(ints, shards) == [hash32_int64(pk) % 5 for pk in ints]


@given(st.integers(min_value=-(1 << 64), max_value=1 << 64), st.integers(min_value=0, max_value=200),
       st.integers(min_value=-5, max_value=5).filter(bool))
def test_a_range_of_keys_hashed_ahead_equals_the_same_keys_as_a_list(start, length, step):
    """A ``range`` skips the per-key check when all of it is int64; either way only int64 keys are
    hashed, each to its own ``Hash32Int64``, as when the same keys come as a list."""
    keys = range(start, start + length * step, step)
    fast.PREHASHED.clear()
    fast.prehash_int64(keys)
    from_range = dict(fast.PREHASHED)
    fast.PREHASHED.clear()
    fast.prehash_int64(list(keys))
    assert from_range == fast.PREHASHED
    assert from_range == {pk: hash32_int64(pk) for pk in keys if -(1 << 63) <= pk < 1 << 63}


def test_the_table_of_keys_hashed_ahead_stays_bounded_and_bools_are_still_refused():
    fast.PREHASHED.clear()
    for start in range(0, 3 * fast.PREHASHED_MAX, 4096):
        fast.prehash_int64(range(start, start + 4096))
        assert len(fast.PREHASHED) <= fast.PREHASHED_MAX
    fast.prehash_int64([1, 0])
    with pytest.raises(ValueError, match="neither int nor str"):
        hash_pk_2_channels([True], ["a", "b"])


@given(st.lists(st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1), st.text(max_size=8)),
                max_size=40),
       st.data())
def test_shards_of_keys_partly_hashed_ahead_equal_the_readable_hash(pks, data):
    """``hash_pk_2_channels`` looks keys up when all are ints hashed ahead, and hashes the rest itself:
    either way each key's shard is its own hash modulo the shard count, whatever was hashed before."""
    fast.PREHASHED.clear()
    ints = [pk for pk in pks if type(pk) is int]
    fast.prehash_int64(data.draw(st.lists(st.sampled_from(ints), unique=True)) if ints else [])
    for keys in (pks, ints):
        expected = [(hash_string_2_uint32(pk) if isinstance(pk, str) else hash32_int64(pk)) % 3 for pk in keys]
        assert hash_pk_2_channels(keys, ["a", "b", "c"]) == expected
    if ints:
        fast.prehash_int64(ints)  # all hashed ahead: the look-up path
        assert hash_pk_2_channels(ints, ["a", "b", "c"]) == [hash32_int64(pk) % 3 for pk in ints]
        with pytest.raises(ValueError, match="neither int nor str"):
            hash_pk_2_channels([*ints, True], ["a", "b", "c"])


@given(st.integers(0, 2**32))
def test_rows_per_insert_drawn_with_choice_are_randint_draws(seed):
    """The TimeTick clients draw rows per insert with ``rng.choice(range(1, 9))`` for speed; the stream
    must be the one ``rng.randint(1, 8)`` gives, so run logs do not depend on the shortcut."""
    import random

    from milvus_edu.mechanisms.timetick.scenarios import _ROWS_PER_INSERT

    a, b = random.Random(seed), random.Random(seed)
    assert [a.choice(_ROWS_PER_INSERT) for _ in range(64)] == [b.randint(1, 8) for _ in range(64)]
    assert a.random() == b.random()  # and they leave the generator in the same state
