"""Lab 3's self-checks accept the right answer and name the typical mistakes; the numbers the lab's prose states
are Milvus's defaults as the model has them."""

from __future__ import annotations

import pandas as pd
import pytest

import milvus_edu
from milvus_edu.config import S, Config
from milvus_edu.mechanisms.flush.labs import (check_filtered_rows, check_open_flush_updates, check_recovery_invariant,
                                   check_segment_rows, filtered_rows, open_flush_updates, segment_binlogs)

V0 = "by-dev-rootcoord-dml_0_100v0"


@pytest.fixture(scope="module")
def basics(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab3") / "basics"
    run = milvus_edu.simulate("flush-basics", seed=1, out_dir=out)
    return out, run


@pytest.fixture(scope="module")
def boundary():
    return milvus_edu.simulate("flush-ts-boundary", seed=1).events


@pytest.fixture(scope="module")
def crash():
    return milvus_edu.simulate("datanode-crash-recovery", seed=1).events


def test_segment_rows_adds_every_sync_of_the_primary_key_field(basics):
    folder, run = basics
    seg = int(run.events[run.events.kind == "storage.audit"].segment.iloc[0])
    files = segment_binlogs(folder, seg)
    sizes = [len(pd.read_parquet(f)) for f in files]
    assert len(files) >= 2  # a full-buffer sync and the flush
    assert check_segment_rows(sum(sizes), folder, seg).ok
    one = check_segment_rows(sizes[0], folder, seg)
    assert not one.ok and "one file" in one.message
    every = sum(len(pd.read_parquet(f)) for f in (folder / "objects/a-bucket/files/insert_log").glob(f"*/*/{seg}/*/*"))
    assert "every field" in check_segment_rows(every, folder, seg).message
    whole_run = sum(len(pd.read_parquet(f)) for f in (folder / "objects/a-bucket/files/insert_log").glob("*/*/*/100/*"))
    assert whole_run > sum(sizes) and "every segment" in check_segment_rows(whole_run, folder, seg).message
    assert "number of files" in check_segment_rows(len(files), folder, seg).message
    assert not check_segment_rows(None, folder, seg).answered
    assert "float" in check_segment_rows(float(sum(sizes)), folder, seg).message


def test_open_flush_updates_counts_every_position_sent_not_only_the_stored(boundary):
    sent, stored, both, start, end = open_flush_updates(boundary, V0)
    assert sent > stored >= 1 and both > sent and end > start
    assert check_open_flush_updates(sent, boundary, V0).ok
    assert "only the ones DataCoord stored" in check_open_flush_updates(stored, boundary, V0).message
    assert "both vchannels" in check_open_flush_updates(both, boundary, V0).message
    assert f"event {start + 1:,}" in check_open_flush_updates(sent + 1, boundary, V0).message


def test_filtered_rows_counts_rows_not_messages(crash):
    rows, messages = filtered_rows(crash)
    assert rows > messages > 0
    assert check_filtered_rows(rows, crash).ok
    assert "one per insert message" in check_filtered_rows(messages, crash).message
    assert not check_filtered_rows(str(rows), crash).ok


def test_recovery_invariant_is_durable():
    assert check_recovery_invariant("durable").ok
    assert check_recovery_invariant(" Durable ").ok
    assert "checkpoints are fine" in check_recovery_invariant("checkpoint-safe").message
    assert "bug switch" in check_recovery_invariant("skip_recovery_filter").message
    assert "about progress" in check_recovery_invariant("flush-completes").message
    assert "flush-durable" in check_recovery_invariant("flush-complete").message  # the old name lists the new ones
    assert not check_recovery_invariant(None).answered


def test_the_defaults_the_lab_states():
    dn = Config().datanode
    assert dn.update_channel_checkpoint_interval_ns == 60 * S  # "every 60 s of message time"
    assert dn.insert_buf_size == 16 * 1024 * 1024  # "16 MiB"
    assert Config().tso.session_ttl_ns == 60 * S  # the takeover waits for the session to expire
    from milvus_edu.mechanisms.flush.check import checkpoint_bound_ms, flush_bound_ms

    tick, timeout = dn.channel_checkpoint_update_tick_ns / 1e6, dn.update_channel_checkpoint_rpc_timeout_ns / 1e6
    assert (tick, timeout) == (10_000, 20_000)  # "the updater's 10 s tick and 20 s timeout"
    assert flush_bound_ms(tick, timeout) == 31_400  # section 6: "within 31.4 s"
    assert checkpoint_bound_ms(tick, timeout) == 750_400  # "at least every 750.4 s"
