"""The simulated Milvus cluster every lesson runs on: one SimPy node per component, over the pure components.

* :mod:`~milvus_edu.cluster.node`: the base of every node (alive, killed, restarted, paused; work bound to the
  node's life) and the one interpreter of the components' effects;
* :mod:`~milvus_edu.cluster.rootcoord`: rootcoord instances (session, keep-alive, liveness, ``tsLoop``) and TSO
  clients;
* :mod:`~milvus_edu.cluster.dml`: proxies, rootcoord's timetick sync, pchannel consumers;
* :mod:`~milvus_edu.cluster.data`: DataCoord, DataNodes, the object store's latency, the id allocator;
* :mod:`~milvus_edu.cluster.querynode`: a QueryNode serving every shard, and the proxy's read path;
* :mod:`~milvus_edu.cluster.control_plane`: what every cluster with a DataNode shares (rootcoord with its time
  ticks, DataCoord, the run's object store).

A lesson (``milvus_edu/mechanisms/<lesson>/``) builds the cluster it needs from these in its scenarios; no lesson
imports another.
"""
