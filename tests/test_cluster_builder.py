"""The cluster builder: a ClusterSpec's shape is what build() wires, bad specs are refused in one line, nodes are
found by name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.cluster.builder import (
    ClusterSpec,
    CollectionSpec,
    DataNodeSpec,
    ProxySpec,
    RootCoordSpec,
    TSOClientSpec,
    build,
)
from milvus_edu.config import Config
from milvus_edu.events import NULL_RECORDER
from milvus_edu.mq import to_physical_channel
from milvus_edu.sim.kernel import Simulation


def _sim() -> Simulation:
    return Simulation(1, NULL_RECORDER, Config())


@st.composite
def specs(draw) -> ClusterSpec:
    pchannels = draw(st.integers(1, 4))
    collections = tuple(CollectionSpec(100 + i, draw(st.integers(1, pchannels)), draw(st.integers(0, pchannels - 1)))
                        for i in range(draw(st.integers(0, 3))))
    return ClusterSpec(
        rootcoords=tuple(RootCoordSpec(offset_ms=draw(st.floats(-1000, 1000))) for _ in range(draw(st.integers(1, 3)))),
        tso_clients=tuple(TSOClientSpec(draw(st.integers(1, 10)), 50.0) for _ in range(draw(st.integers(0, 2)))),
        pchannels=pchannels, proxies=(ProxySpec(),) * draw(st.integers(0, 3)), consumers=draw(st.booleans()),
        collections=collections)


@settings(max_examples=40, deadline=None)
@given(specs())
def test_every_node_of_the_spec_is_built_and_registered_under_its_name(spec):
    cluster = build(_sim(), spec)
    names = ([f"rootcoord-{i}" for i in range(1, len(spec.rootcoords) + 1)]
             + [f"client-{i}" for i in range(len(spec.tso_clients))]
             + [f"proxy-{i}" for i in range(1, len(spec.proxies) + 1)]
             + ([f"consumer-{i}" for i in range(spec.pchannels)] if spec.consumers else []))
    assert list(cluster.sim.nodes) == names
    assert [cluster.node(n).name for n in names] == names
    assert len(cluster.pchannels) == spec.pchannels
    for coll, c in zip(cluster.collections, spec.collections):
        # shard j lies on pchannel (first_pchannel + j) mod pchannels
        assert [to_physical_channel(v) for v in coll.vchannels] == [
            cluster.pchannels[(c.first_pchannel + j) % spec.pchannels] for j in range(c.shards)]
    assert [c.pchannel for c in cluster.consumers] == (cluster.pchannels if spec.consumers else [])


def test_a_query_shaped_cluster_has_its_read_path_and_catalog():
    spec = ClusterSpec(pchannels=2, proxies=(ProxySpec(clock_offset_ms=-5.0),) * 2, datacoord=True,
                       datanodes=(DataNodeSpec(), DataNodeSpec("datanode-2", 21, standby=True)), querynodes=1)
    cluster = build(_sim(), spec)
    assert [p.name for p in cluster.read_proxies] == ["proxy-1", "proxy-2"]
    assert cluster.datanode.name == "datanode-1" and cluster.standby.name == "datanode-2"
    assert cluster.catalog is not None and cluster.client("a").proxy.name == "proxy-1"
    assert cluster.client("b").proxy.name == "proxy-2" and cluster.client("a") is cluster.client("a")


@pytest.mark.parametrize("spec, message", [
    (dict(proxies=(ProxySpec(),)), "need pchannels"),
    (dict(rootcoords=(), pchannels=2), "need a rootcoord"),
    (dict(pchannels=2, datanodes=(DataNodeSpec(),)), "need DataCoord"),
    (dict(pchannels=2, datacoord=True, rpc_failure_rate=1.0), "rpc_failure_rate must be in [0, 1)"),
    (dict(pchannels=2, proxies=(ProxySpec(),), datacoord=True, collections=(CollectionSpec(1, 2),)),
     "DataCoord knows the spec's collections only through a DataNode"),
    (dict(pchannels=2, querynodes=2), "at most one QueryNode"),
    (dict(pchannels=2, querynodes=1), "a QueryNode needs DataCoord"),
    (dict(pchannels=2, datacoord=True, datanodes=(DataNodeSpec(),), collections=(CollectionSpec(1, 2),)),
     "set create_collections_at_ms"),
    (dict(pchannels=1, proxies=(ProxySpec(),), collections=(CollectionSpec(1, 1),), create_collections_at_ms=100.0),
     "set datacoord=True and datanodes=(DataNodeSpec(),)"),
    (dict(pchannels=2, collections=(CollectionSpec(1, 3),)), "has 3 shards; use 1 to 2"),
])
def test_a_bad_spec_is_refused_in_one_line(spec, message):
    with pytest.raises(ValueError) as err:
        ClusterSpec(**spec)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_node_name_says_which_names_there_are():
    cluster = build(_sim(), ClusterSpec(tso_clients=(TSOClientSpec(1, 10.0),)))
    with pytest.raises(ValueError, match=r"no node named 'proxy-1'; the cluster has rootcoord-1, client-0"):
        cluster.kill("proxy-1")


def test_sdk_clients_need_a_querynode():
    with pytest.raises(ValueError, match="set querynodes=1"):
        build(_sim(), ClusterSpec()).client("me")
