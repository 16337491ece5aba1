"""Rows per second through the DataNode's write path: write buffer -> sync task -> Parquet binlogs on disk.

Feeds ``--rows`` insert rows (in messages of ``--batch`` rows, 3,072 payload bytes each, as the flush
scenarios do) into a :class:`~milvus_edu.datanode.writebuffer.WriteBuffer` with a small insert buffer so
that full-buffer syncs happen, runs every sync with :class:`~milvus_edu.datanode.syncmgr.task.SyncTask`
under :func:`milvus_edu.effects.drive` (ids from a counter, objects written through a local
:class:`~milvus_edu.storage.objectstore.ChunkManager`, ``SaveBinlogPaths`` answered at once), and
prints rows/s for the whole path and for the sync part alone. Prints figures only.

    python benchmarks/bench_flush.py [--rows 200000] [--batch 5] [--buffer-mib 1]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's milvus_edu

from milvus_edu.config import DataNodeParams  # noqa: E402
from milvus_edu.datanode.metacache import MetaCache  # noqa: E402
from milvus_edu.datanode.syncmgr.meta_writer import BrokerMetaWriter, SaveBinlogPaths  # noqa: E402
from milvus_edu.datanode.syncmgr.storage_serializer import StorageSerializer  # noqa: E402
from milvus_edu.datanode.syncmgr.task import AllocIDs, SyncTask, WriteObjects  # noqa: E402
from milvus_edu.datanode.writebuffer import WriteBuffer  # noqa: E402
from milvus_edu.effects import drive  # noqa: E402
from milvus_edu.mq.msg import InsertMsg  # noqa: E402
from milvus_edu.proto import MsgPosition  # noqa: E402
from milvus_edu.storage.objectstore import ChunkManager  # noqa: E402

CHANNEL = "by-dev-rootcoord-dml_0_100v0"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=5, help="rows per insert message")
    ap.add_argument("--buffer-mib", type=float, default=1.0, help="insert buffer size (Milvus: 16 MiB)")
    args = ap.parse_args()

    params = DataNodeParams(insert_buf_size=int(args.buffer_mib * (1 << 20)))
    ids = itertools.count(10_000)
    with tempfile.TemporaryDirectory(prefix="bench-flush-") as tmp:
        store = ChunkManager.local(tmp)
        metacache = MetaCache(100, CHANNEL)
        wb = WriteBuffer(CHANNEL, metacache, params, random.Random(1), alloc_segment_id=lambda: next(ids))

        def handle(effect):
            if isinstance(effect, AllocIDs):
                first = next(ids)
                for _ in range(effect.count - 1):
                    next(ids)
                return first
            if isinstance(effect, WriteObjects):
                store.multi_write(effect.objects)
                return None
            if isinstance(effect, SaveBinlogPaths):
                return None
            raise TypeError(effect)

        sync_s = 0.0
        synced = files = 0
        pk = 0
        ts = 1 << 18
        start = time.perf_counter()
        while pk < args.rows:
            pks = tuple(range(pk, pk + args.batch))
            pk += args.batch
            ts += 1 << 18
            msg = InsertMsg(shard_name=CHANNEL, collection_id=100, partition_id=1001, segment_id=5000, pks=pks,
                            timestamps=(ts,) * len(pks), payload_bytes=3072 * len(pks), msg_id=pk)
            packs = wb.buffer_data([msg], [], MsgPosition(CHANNEL, pk - 1, ts - 1), MsgPosition(CHANNEL, pk, ts))
            for pack in packs:
                t0 = time.perf_counter()
                task = SyncTask(pack, metacache=metacache, serializer=StorageSerializer(metacache),
                                meta_writer=BrokerMetaWriter(20), chunk_manager_root=store.root_path)
                drive(task.run(), handle)
                wb.sync_done(pack)
                sync_s += time.perf_counter() - t0
                synced += pack.batch_rows
                files += len(task.segment_data)
        total_s = time.perf_counter() - start
    print(f"{pk:,} rows in messages of {args.batch}; insert buffer {args.buffer_mib:g} MiB")
    print(f"whole path (buffer + sync + Parquet on disk): {pk / total_s:,.0f} rows/s ({total_s:.2f} s)")
    if synced:
        print(f"syncs alone: {synced:,} rows in {files:,} files, {synced / sync_s:,.0f} rows/s ({sync_s:.2f} s)")


if __name__ == "__main__":
    main()
