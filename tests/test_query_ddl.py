"""ddl-recreate-under-load: a collection dropped and created again while clients write and read.

The proxies' meta caches are invalidated by the drop before it finishes; between the drop and the re-creation every
request fails with ``collection not found`` (no retry); the first insert after it still carries the old schema
version, fails with ``collection schema mismatch`` and is retried by the SDK into the new collection; a read waiting
on tsafe when the QueryNode releases the old collection fails as Milvus's closed delegator answers.
"""

from __future__ import annotations

import hashlib
import json

import pytest

import milvus_edu
from milvus_edu.mechanisms.query.summary import KeyEvents
from milvus_edu.narrate import detail_dict

SCENARIO = "ddl-recreate-under-load"


@pytest.fixture(scope="module", params=[1, 2])
def run(request):
    return milvus_edu.simulate(SCENARIO, seed=request.param)


def _rows(run, kind):
    ev = run.events
    out = []
    for row in ev[ev.kind == kind].to_dict("records"):
        row["d"] = detail_dict(row["detail"])
        out.append(row)
    return out


def test_the_run_keeps_every_promise(run):
    assert run.summary["checks"]["ok"], run.summary["checks"]["violations"][:1]


def test_the_drop_invalidates_every_proxy_before_it_finishes_and_the_time_tick_waits_for_it(run):
    ddl = [r for r in _rows(run, "rootcoord.ddl") if r["d"]["task"] == "DropCollection"]
    started, done = ddl
    assert (started["d"]["state"], done["d"]["state"]) == ("started", "done") and started["ts"] == done["ts"]
    every = [r for r in _rows(run, "proxy.meta_cache") if r["d"]["result"] == "invalidate"]
    invalidations = [r for r in every if started["seq"] < r["seq"] < done["seq"]]
    assert sorted(r["node"] for r in invalidations) == ["proxy-1", "proxy-2"]
    assert all(r["ts"] == started["ts"] for r in invalidations)
    # each create (the first C0 and the new one) expires the name on every proxy first, as Go's createCollectionTask
    creates = [r for r in _rows(run, "rootcoord.ddl") if r["d"]["task"] == "CreateCollection" and r["d"]["state"] == "done"]
    assert len(creates) == 2
    for create in creates:
        assert sorted(r["node"] for r in every if r["ts"] == create["ts"]) == ["proxy-1", "proxy-2"]
    assert started["d"]["min_ddl_ts"] < started["ts"] <= done["d"]["min_ddl_ts"]
    ev = run.events
    ddl_ticks = ev[(ev.kind == "rootcoord.timetick_update") & (ev.peer == "ddl")]
    during = ddl_ticks[(ddl_ticks.seq > started["seq"]) & (ddl_ticks.seq < done["seq"])]
    assert (during.ts < started["ts"]).all()
    dropped = _rows(run, "client.drop_collection")[0]
    assert dropped["error"] is None and dropped["d"]["collection_id"] == 100 and dropped["seq"] > done["seq"]


def test_requests_between_the_drop_and_the_re_creation_fail_with_collection_not_found(run):
    drop = _rows(run, "client.drop_collection")[0]
    create = [r for r in _rows(run, "client.create_collection") if r["d"]["collection_id"] == 101][0]
    failed = [r for kind in ("client.insert", "client.read") for r in _rows(run, kind)
              if r["error"] == "collection not found[database=default][collection=C0]"]
    assert len(failed) >= 4
    assert all(drop["t_ms"] - 10 < r["t_ms"] < create["t_ms"] + 10 for r in failed)
    assert all(r["d"].get("attempts", 1) == 1 for r in failed)  # the SDK does not retry collection not found


def test_the_sdk_retries_a_schema_mismatch_into_the_new_collection(run):
    retries = _rows(run, "client.retry")
    assert {r["node"] for r in retries} == {"Client1", "Client2"}
    for retry in retries:
        assert retry["error"] == "collection schema mismatch[collection=C0]" and retry["d"]["sleep_ms"] == 200.0
        after = [r for r in _rows(run, "client.insert") if r["node"] == retry["node"] and r["seq"] > retry["seq"]]
        landed = after[0]
        assert landed["error"] is None and landed["d"]["collection_id"] == 101 and landed["d"]["attempts"] == 2
    described = [r for r in _rows(run, "client.describe_collection") if r["d"]["collection_id"] == 101]
    assert {r["node"] for r in described} == {"Client1", "Client2"}


def test_a_read_waiting_when_the_old_collection_is_released_fails_as_a_closed_delegator_answers(run):
    released = _rows(run, "querynode.release")
    assert sorted(r["vchannel"] for r in released) == ["by-dev-rootcoord-dml_0_100v0", "by-dev-rootcoord-dml_1_100v1"]
    read = [r for r in _rows(run, "client.read") if r["node"] == "Client4"][0]
    assert read["error"].startswith("delegator closed during wait tsafe: channel not available[channel=")
    later = [r for r in _rows(run, "client.read") if r["seq"] > released[-1]["seq"] and r["error"] is None]
    assert later and all(r["d"]["collection"] == "C0" for r in later)


def test_the_timeline_shows_misses_invalidations_and_retries_but_not_hits(run):
    keys = KeyEvents()
    shown = [row for row in run.events.to_dict("records") if keys.show(row)]
    results = {detail_dict(r["detail"])["result"] for r in shown if r["kind"] == "proxy.meta_cache"}
    assert results == {"miss", "invalidate", "schema_mismatch"}
    kinds = {r["kind"] for r in shown}
    assert {"client.retry", "client.drop_collection", "rootcoord.ddl", "querynode.release"} <= kinds
    assert any(r["kind"] == "proxy.meta_cache" and detail_dict(r["detail"])["result"] == "hit"
               for r in run.events.to_dict("records"))


def test_every_new_kind_is_narrated(run):
    from milvus_edu.registry import describer

    for kind in ("client.drop_collection", "client.describe_collection", "client.retry", "proxy.meta_cache",
                 "rootcoord.ddl", "querynode.release"):
        for row in _rows(run, kind):
            text = describer(kind)(row)
            assert text and "None" not in text, (kind, text)


def test_same_seed_same_bytes(tmp_path):
    digests = []
    for name in ("a", "b"):
        milvus_edu.simulate(SCENARIO, seed=3, out_dir=tmp_path / name, keep_events=False)
        digests.append({f: hashlib.sha256((tmp_path / name / f).read_bytes()).hexdigest()
                        for f in ("events.parquet", "events.jsonl", "summary.json")})
    assert digests[0] == digests[1]


def test_dropping_without_the_meta_cache_is_refused_in_one_line():
    steps = [{"at": 0.5, "client": "c", "op": "create_collection", "collection": "X"},
             {"at": 1.0, "client": "c", "op": "drop_collection", "collection": "X"}]
    run = milvus_edu.simulate("workload", seed=1, duration_s=2, options={"steps": steps})
    ev = run.events
    row = ev[ev.kind == "client.drop_collection"].iloc[0]
    assert row["error"] == "drop_collection needs the cluster's meta cache (ClusterSpec(meta_cache=True))"


@pytest.mark.parametrize("drop_at_s", [1.998, 1.9985, 2.0])
def test_no_proxy_caches_the_dropped_collection_again(drop_at_s):
    """A describe waits for a running drop of its name (the drop holds the name's write lock in rootcoord's
    scheduler), and the re-create expires every proxy's entry for the name first; so once the drop is answered,
    only inserts already past the proxy's cache still reach the old collection (here within 100 ms), never one
    sent after the collection was created again."""
    for seed in (1, 2, 3):
        events = milvus_edu.simulate("ddl-recreate-under-load", seed=seed, options={"drop_at_s": drop_at_s}).events
        dropped = events[events.kind == "client.drop_collection"].iloc[0]
        old = json.loads(dropped.detail)["collection_id"]
        into_old = events[(events.kind == "mq.produce") & (events.msg_type == "Insert")
                          & events.vchannel.str.contains(f"_{old}v", regex=False)]
        assert into_old.t_ms.max() < dropped.t_ms + 100, (seed, into_old.t_ms.max(), dropped.t_ms)
