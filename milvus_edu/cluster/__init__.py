"""The simulated Milvus cluster every lesson runs on: one SimPy node per component, over the pure components.

* :mod:`~milvus_edu.cluster.node`: the base of every node (alive, killed, restarted, paused; work bound to the
  node's life) and the one interpreter of the components' effects;
* :mod:`~milvus_edu.cluster.rootcoord`: rootcoord instances (session, keep-alive, liveness, ``tsLoop``) and TSO
  clients;
* :mod:`~milvus_edu.cluster.dml`: proxies, rootcoord's timetick sync, pchannel consumers;
* :mod:`~milvus_edu.cluster.data`: DataCoord, DataNodes, the object store's latency, the id allocator;
* :mod:`~milvus_edu.cluster.querynode`: a QueryNode serving every shard, and the proxy's read path;
* :mod:`~milvus_edu.cluster.control_plane`: what every cluster with a DataNode shares (the run's object store, the
  collection whose rows go to DataCoord's segments);
* :mod:`~milvus_edu.cluster.catalog`: collections by name and the DDL, flush and handoff SDK clients run;
* :mod:`~milvus_edu.cluster.client`: the simulated SDK client (``MilvusClient``) and its programs of steps;
* :mod:`~milvus_edu.cluster.builder`: the one builder: a cluster's shape as data (``ClusterSpec``), ``build`` wires
  it and returns a ``Cluster`` holding every node by role.

A lesson (``milvus_edu/mechanisms/<lesson>/``) describes the cluster it needs as a ``ClusterSpec`` in its scenarios
and builds it with :func:`~milvus_edu.cluster.builder.build`; it never creates a node itself, and no lesson imports
another.
"""
