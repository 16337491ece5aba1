"""The DataNode: flowgraph per vchannel, write buffer, sync to binlogs, channel checkpoints.

Models ``internal/flushcommon`` and ``internal/datanode`` of Milvus 2.5. Components here are pure (no
simulation imports): time, randomness and effects are injected, and the simulator drives them.
"""
