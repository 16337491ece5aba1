"""The bucket layout, DataCoord's log-id compression, the object store and the Parquet binlogs.

Ports Milvus 2.5 ``pkg/util/metautil/binlog_test.go`` (TestParseInsertLogPath),
``internal/storage/binlog_util_test.go`` (TestParseSegmentIDByBinlog) and
``internal/metastore/kv/binlog/binlog_test.go`` (TestBinlog_Compress); then pins the chunk manager's
rules (no silent overwrite) and that the files are plain Parquet for pandas and pyarrow but rejected
by our readers when damaged or foreign.
"""

from __future__ import annotations

import io
from dataclasses import replace

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.datanode.metacache import MetaCache
from milvus_edu.datanode.syncmgr.pack import PK_FIELD_ID, DeleteData, InsertData, SyncPack
from milvus_edu.datanode.syncmgr.storage_serializer import (
    BINLOG_MARKER_KEY,
    BinlogError,
    StorageSerializer,
    read_delta_log,
    read_insert_binlog,
    read_stats_log,
)
from milvus_edu.merr import ParameterInvalidError
from milvus_edu.proto import Binlog, FieldBinlog, MsgPosition, SaveBinlogPathsRequest, SegmentInfo, SegmentState
from milvus_edu.storage.binlog import (
    COMPOUND_STATS_TYPE,
    DEFAULT_BUCKET,
    DEFAULT_ROOT_PATH,
    DELETE_BINLOG,
    INSERT_BINLOG,
    STATS_BINLOG,
    InsertLogPath,
    build_delta_log_path,
    build_insert_log_path,
    build_log_path_with_root_path,
    build_stats_log_path,
    compress_field_binlogs,
    compress_save_binlog_paths,
    decompress_bin_log,
    decompress_bin_logs,
    get_log_id_from_binlog_path,
    get_segment_id_from_delta_log_path,
    get_segment_id_from_insert_log_path,
    get_segment_id_from_stats_log_path,
    join_id_path,
    parse_insert_log_path,
    parse_segment_id_by_binlog,
)
from milvus_edu.storage.objectstore import ChunkManager, ObjectOverwriteError

# =================================================================================================
# Paths (metautil/binlog.go)
# =================================================================================================


def test_paths_follow_milvus_bucket_layout_under_the_root_path():
    """The three layouts of reference §4.6, with the default root ``files``."""
    assert DEFAULT_ROOT_PATH == "files" and DEFAULT_BUCKET == "a-bucket"
    assert build_insert_log_path("files", 1, 2, 3, 100, 7) == "files/insert_log/1/2/3/100/7"
    assert build_delta_log_path("files", 1, 2, 3, 7) == "files/delta_log/1/2/3/7"
    assert build_stats_log_path("files", 1, 2, 3, 100, 7) == "files/stats_log/1/2/3/100/7"
    assert build_stats_log_path("files", 1, 2, 3, 100, COMPOUND_STATS_TYPE) == "files/stats_log/1/2/3/100/1"


def test_paths_join_like_go_path_join():
    """``path.Join`` drops empty elements and cleans slashes; ``JoinIDPath`` prints negative ids with a sign."""
    assert build_insert_log_path("", 1, 2, 3, 4, 5) == "insert_log/1/2/3/4/5"
    assert build_delta_log_path("/var/milvus/", 1, 2, 3, 5) == "/var/milvus/delta_log/1/2/3/5"
    assert join_id_path(1, -2, 3) == "1/-2/3"


@pytest.mark.parametrize("path, expected", [
    ("8a8c3ac2298b12f/insert_log/446266956600703270/446266956600703326/447985737531772787/102/447985737523710526",
     InsertLogPath(446266956600703270, 446266956600703326, 447985737531772787, 102, 447985737523710526)),
    ("foobar", None),
    ("8a8c3ac2298b12f/insert_log/446266956600703270/446266956600703326/447985737531772787/102/foo", None),
    ("8a8c3ac2298b12f/insert_log/446266956600703270/446266956600703326/447985737531772787/foo/447985737523710526", None),
    ("8a8c3ac2298b12f/insert_log/446266956600703270/446266956600703326/foo/102/447985737523710526", None),
    ("8a8c3ac2298b12f/insert_log/446266956600703270/foo/447985737531772787/102/447985737523710526", None),
    ("8a8c3ac2298b12f/insert_log/foo/446266956600703326/447985737531772787/102/447985737523710526", None),
])
def test_parse_insert_log_path_reads_the_last_five_ids(path, expected):
    """Ports TestParseInsertLogPath (the positive case and negatives 1-6)."""
    assert parse_insert_log_path(path) == expected


def test_parse_insert_log_path_quirks_kept():
    """Only the last five elements are read: a stats path parses, ids beyond int64 or with ``_`` do not."""
    assert parse_insert_log_path("files/stats_log/1/2/3/100/1") == InsertLogPath(1, 2, 3, 100, 1)
    assert parse_insert_log_path("files/insert_log/1/2/3/100/9223372036854775808") is None
    assert parse_insert_log_path("files/insert_log/1/2/3/100/1_0") is None
    assert parse_insert_log_path("1/2/3/4/5") is None  # fewer than six elements


@given(st.lists(st.integers(0, (1 << 63) - 1), min_size=5, max_size=5), st.sampled_from(["files", "a/b", "x"]))
def test_build_then_parse_insert_log_path_round_trips(ids, root):
    """Every path built for non-negative int64 ids parses back to the same ids."""
    path = build_insert_log_path(root, *ids)
    assert parse_insert_log_path(path) == InsertLogPath(*ids)
    assert get_segment_id_from_insert_log_path(path) == ids[2]
    assert get_log_id_from_binlog_path(path) == ids[4]


def test_segment_id_from_paths_counts_from_the_end():
    """``GetSegmentIDFrom*LogPath``: 0 when the element is missing or not a number."""
    assert get_segment_id_from_insert_log_path("files/insert_log/1/2/3/100/7") == 3
    assert get_segment_id_from_stats_log_path("files/stats_log/1/2/3/100/1") == 3
    assert get_segment_id_from_delta_log_path("files/delta_log/1/2/3/7") == 3
    assert get_segment_id_from_delta_log_path("7") == 0
    assert get_segment_id_from_insert_log_path("files/insert_log/1/2/x/100/7") == 0


@pytest.mark.parametrize("root, path, expected", [
    ("files", "files/insertLog/123/456/1/101/10000001", 1),
    ("files", "files/insertLog/123/456/434828745294479362/101/10000001", 434828745294479362),
    ("files", "files/123", None),
    ("files", "", None),
    ("files", "files/insertLog/123/456/segment_id/101/10000001", None),
    ("tenant1/files", "tenant1/files/inert_log/609/610/457/793", None),
    ("file", "file/delta_log/436300346003230019/436300346003230020/436300346003230115/436300346003230216",
     436300346003230115),
    ("file", "file/delta_log/436300346003230019/436300346003230020/436300346003230115", None),
])
def test_parse_segment_id_by_binlog(root, path, expected):
    """Ports TestParseSegmentIDByBinlog (all eight cases)."""
    if expected is None:
        with pytest.raises(ValueError):
            parse_segment_id_by_binlog(root, path)
    else:
        assert parse_segment_id_by_binlog(root, path) == expected


def test_parse_segment_id_by_binlog_messages_are_go_s():
    """The error texts name the path (and the root when it is not a prefix)."""
    with pytest.raises(ValueError, match='path "x/1" does not contains rootPath "files"'):
        parse_segment_id_by_binlog("files", "x/1")
    with pytest.raises(ValueError, match="files/delta_log/1 is not a valid delta log path"):
        parse_segment_id_by_binlog("files", "files/delta_log/1")


# =================================================================================================
# DataCoord keeps log ids only (metastore/kv/binlog/binlog.go)
# =================================================================================================


def _segment_with_logs(root: str, n: int) -> SegmentInfo:
    coll, part, seg = 2, 1, 3
    return SegmentInfo(
        id=seg, collection_id=coll, partition_id=part, insert_channel="ch", num_of_rows=100,
        state=SegmentState.FLUSHED,
        binlogs=(FieldBinlog(101, tuple(
            Binlog(5, 0, 0, log_path=build_insert_log_path(root, coll, part, seg, 101, 100 + i)) for i in range(n))),),
        deltalogs=(FieldBinlog(0, tuple(
            Binlog(5, 0, 0, log_path=build_delta_log_path(root, coll, part, seg, 200 + i)) for i in range(n))),),
        statslogs=(FieldBinlog(101, tuple(
            Binlog(5, 0, 0, log_path=build_stats_log_path(root, coll, part, seg, 101, 300 + i)) for i in range(n))),),
    )


def test_compress_keeps_log_ids_and_decompress_rebuilds_the_same_paths():
    """Ports TestBinlog_Compress (round trip): compressed records carry ids only, paths come back equal."""
    original = _segment_with_logs(DEFAULT_ROOT_PATH, 10)
    compressed = replace(original,
                         binlogs=compress_field_binlogs(original.binlogs),
                         deltalogs=compress_field_binlogs(original.deltalogs),
                         statslogs=compress_field_binlogs(original.statslogs))
    assert all(b.log_path == "" and b.log_id for fb in compressed.binlogs for b in fb.binlogs)
    assert [b.log_id for b in compressed.deltalogs[0].binlogs] == list(range(200, 210))
    restored = decompress_bin_logs(compressed)
    for kind in ("binlogs", "deltalogs", "statslogs"):
        paths = [b.log_path for fb in getattr(restored, kind) for b in fb.binlogs]
        assert paths == [b.log_path for fb in getattr(original, kind) for b in fb.binlogs]
        assert len(paths) == 10


def test_compress_rejects_a_path_without_slash_and_decompress_an_unknown_type():
    """Ports TestBinlog_Compress (error paths): ``invalid parameter`` for both."""
    bad = (FieldBinlog(106, (Binlog(10000, 0, 0, log_path="test"),)),)
    with pytest.raises(ParameterInvalidError, match="invalid binlog path: test: invalid parameter"):
        compress_field_binlogs(bad)
    ids_only = (FieldBinlog(106, (Binlog(10000, 0, 0, log_id=1),)),)
    with pytest.raises(ParameterInvalidError, match="invalid binlog type"):
        decompress_bin_log("bm25", 1, 1, 1, ids_only)


def test_decompress_uses_the_field_only_where_the_layout_has_one():
    """Delta logs have no field level, so their rebuilt path ignores the field id."""
    assert build_log_path_with_root_path("files", DELETE_BINLOG, 1, 2, 3, 999, 7) == "files/delta_log/1/2/3/7"
    assert build_log_path_with_root_path("files", INSERT_BINLOG, 1, 2, 3, 100, 7) == "files/insert_log/1/2/3/100/7"
    assert build_log_path_with_root_path("files", STATS_BINLOG, 1, 2, 3, 100, 1) == "files/stats_log/1/2/3/100/1"


def test_compress_save_binlog_paths_clears_every_kind_of_path():
    """``CompressSaveBinlogPaths``: insert, stats and delta logs of a request all keep ids only."""
    seg = _segment_with_logs("files", 2)
    req = SaveBinlogPathsRequest(3, 2, 1, "ch", field2_binlog_paths=seg.binlogs,
                                 field2_statslog_paths=seg.statslogs, deltalogs=seg.deltalogs)
    out = compress_save_binlog_paths(req)
    every = [b for group in (out.field2_binlog_paths, out.field2_statslog_paths, out.deltalogs)
             for fb in group for b in fb.binlogs]
    assert len(every) == 6 and all(b.log_path == "" for b in every)
    assert sorted(b.log_id for b in every) == [100, 101, 200, 201, 300, 301]


# =================================================================================================
# ChunkManager (object storage)
# =================================================================================================


@pytest.fixture(params=["local", "mock"])
def chunk_manager(request, tmp_path):
    if request.param == "local":
        return ChunkManager.local(tmp_path)
    return ChunkManager.from_uri("mock://")


def test_local_chunk_manager_lays_files_out_in_the_bucket_folder(tmp_path):
    """The default bucket is ``<dir>/a-bucket`` and keys are paths inside it, root path first."""
    cm = ChunkManager.local(tmp_path)
    cm.multi_write({"files/insert_log/1/2/3/100/7": b"abc"})
    assert (tmp_path / "a-bucket" / "files" / "insert_log" / "1" / "2" / "3" / "100" / "7").read_bytes() == b"abc"
    assert cm.root_path == "files"


def test_from_file_uri_is_the_same_bucket_as_local(tmp_path):
    """A ``file://`` URI opens the same folder a local chunk manager writes."""
    ChunkManager.local(tmp_path).multi_write({"files/delta_log/1/2/3/9": b"d"})
    cm = ChunkManager.from_uri((tmp_path / "a-bucket").as_uri())
    assert cm.read("files/delta_log/1/2/3/9") == b"d"


def test_multi_write_read_exist_list_remove(chunk_manager):
    """``MultiWrite``/``Read``/``Exist``/``WalkWithPrefix``/``Remove``, with string-prefix listing as MinIO."""
    cm = chunk_manager
    cm.multi_write({"files/insert_log/1/2/3/100/7": b"a", "files/insert_log/1/2/30/100/8": b"b"})
    assert cm.exist("files/insert_log/1/2/3/100/7") and not cm.exist("files/insert_log/1/2/3/100/8")
    assert cm.read("files/insert_log/1/2/30/100/8") == b"b"
    assert cm.list_with_prefix("files/insert_log/1/2/3") == [
        "files/insert_log/1/2/3/100/7", "files/insert_log/1/2/30/100/8"]
    assert cm.list_with_prefix("files/insert_log/1/2/3/") == ["files/insert_log/1/2/3/100/7"]
    assert cm.list_with_prefix("files/delta_log/") == []
    cm.remove("files/insert_log/1/2/3/100/7")
    cm.remove("files/insert_log/1/2/3/100/7")  # removing a missing object is fine
    assert not cm.exist("files/insert_log/1/2/3/100/7")
    with pytest.raises(FileNotFoundError, match="files/insert_log/1/2/3/100/7"):
        cm.read("files/insert_log/1/2/3/100/7")


def test_multi_write_never_overwrites_with_different_bytes(chunk_manager):
    """A log id is never rewritten: other bytes raise and nothing of that call is written; same bytes pass."""
    cm = chunk_manager
    cm.multi_write({"files/stats_log/1/2/3/100/5": b"v1"})
    cm.multi_write({"files/stats_log/1/2/3/100/5": b"v1"})  # a retried write
    with pytest.raises(ObjectOverwriteError, match="files/stats_log/1/2/3/100/5 already exists with different bytes"):
        cm.multi_write({"files/stats_log/1/2/3/100/4": b"new", "files/stats_log/1/2/3/100/5": b"v2"})
    assert cm.read("files/stats_log/1/2/3/100/5") == b"v1"
    assert not cm.exist("files/stats_log/1/2/3/100/4")
    assert isinstance(ObjectOverwriteError("x"), ValueError)


@pytest.mark.parametrize("key", ["/files/a", "files//a", "files/../a", "", "files/./a"])
def test_bad_object_keys_are_refused(chunk_manager, key):
    """Keys are relative, clean paths; anything else is a ``ValueError`` saying how to write one."""
    with pytest.raises(ValueError, match="relative path"):
        chunk_manager.multi_write({key: b"x"})


# =================================================================================================
# Parquet binlogs
# =================================================================================================


def _encoded(pks=(1, 2, 3), ts=(101, 102, 103), deletes=((2,), (104,)), flush=False):
    cache = MetaCache(1, "ch")
    cache.add_segment(SegmentInfo(id=10, collection_id=1, partition_id=2, insert_channel="ch"))
    pack = SyncPack(1, 2, 10, "ch", insert_data=(InsertData(tuple(pks), tuple(ts)),),
                    delete_data=DeleteData(*deletes) if deletes else None, ts_from=min(ts), ts_to=max(ts),
                    checkpoint=MsgPosition("ch", 5, 110), batch_rows=len(pks), is_flush=flush)
    return StorageSerializer(cache).encode_buffer(pack)


def test_insert_binlog_round_trips_with_pyarrow_and_pandas(tmp_path):
    """One column per file, readable by pyarrow and pandas directly, with our metadata."""
    encoded = _encoded()
    pk_file = tmp_path / "pk.parquet"
    pk_file.write_bytes(encoded.binlog_blobs[100].value)
    table = pq.read_table(pk_file)
    assert table.column_names == ["pk"] and table.column("pk").to_pylist() == [1, 2, 3]
    assert table.schema.metadata[BINLOG_MARKER_KEY.encode()] == b"1"
    frame = pd.read_parquet(io.BytesIO(encoded.binlog_blobs[1].value))
    assert frame["Timestamp"].tolist() == [101, 102, 103]
    back = read_insert_binlog(pk_file)
    assert back.columns == {"pk": (1, 2, 3)} and back.num_rows == 3
    assert {k: back.metadata[k] for k in ("collection_id", "partition_id", "segment_id", "field_id")} == {
        "collection_id": "1", "partition_id": "2", "segment_id": "10", "field_id": "100"}
    assert (back.metadata["timestamp_from"], back.metadata["timestamp_to"]) == ("101", "103")


def test_delta_and_stats_logs_round_trip_with_pyarrow_and_pandas():
    """Delta logs hold (pk, ts) rows; stats logs hold the distinct pks and their min and max."""
    encoded = _encoded(pks=(5, 3, 5, 9), ts=(1, 2, 3, 4), deletes=((3, 9), (7, 8)))
    delta = read_delta_log(encoded.delta_blob.value)
    assert delta.columns == {"pk": (3, 9), "ts": (7, 8)}
    assert pd.read_parquet(io.BytesIO(encoded.delta_blob.value)).to_dict("list") == {"pk": [3, 9], "ts": [7, 8]}
    stats = read_stats_log(encoded.batch_stats_blob.value)
    assert stats.columns == {"pk": (3, 5, 9)}
    assert (stats.metadata["min_pk"], stats.metadata["max_pk"], stats.metadata["row_num"]) == ("3", "9", "4")
    assert pq.read_table(pa.BufferReader(encoded.batch_stats_blob.value)).num_rows == 3


def test_varchar_primary_keys_are_strings():
    """A VarChar pk becomes a Parquet string column."""
    encoded = _encoded(pks=("b", "a"), ts=(1, 2), deletes=(("a",), (3,)))
    assert pq.read_table(pa.BufferReader(encoded.binlog_blobs[100].value)).schema.field("pk").type == pa.string()
    assert read_delta_log(encoded.delta_blob.value).columns["pk"] == ("a",)
    assert read_stats_log(encoded.batch_stats_blob.value).metadata["min_pk"] == "a"


def test_a_bucket_of_binlogs_reads_as_one_dataset(tmp_path):
    """Files of several segments under ``insert_log/.../100/`` read together with ``pyarrow.dataset``."""
    cm = ChunkManager.local(tmp_path)
    for seg, pks in ((10, (1, 2)), (11, (3,))):
        cache = MetaCache(1, "ch")
        cache.add_segment(SegmentInfo(id=seg, collection_id=1, partition_id=2, insert_channel="ch"))
        pack = SyncPack(1, 2, seg, "ch", insert_data=(InsertData(pks, tuple(range(len(pks)))),), batch_rows=len(pks))
        blob = StorageSerializer(cache).encode_buffer(pack).binlog_blobs[100]
        cm.multi_write({build_insert_log_path("files", 1, 2, seg, 100, seg * 10): blob.value})
    paths = cm.list_with_prefix("files/insert_log/1/2/")
    dataset = ds.dataset(paths, filesystem=cm.filesystem, format="parquet")
    assert sorted(dataset.to_table().column("pk").to_pylist()) == [1, 2, 3]


def test_same_rows_give_the_same_bytes():
    """Encoding is deterministic: the same pack gives byte-identical files (a retried write is harmless)."""
    assert _encoded().binlog_blobs[100].value == _encoded().binlog_blobs[100].value


def test_damaged_file_raises_binlog_error_naming_it():
    """Truncated, bit-flipped or random bytes: one ``BinlogError`` line with the file's name."""
    good = _encoded().binlog_blobs[100].value
    with pytest.raises(BinlogError, match=r"^files/insert_log/1/2/10/100/7: damaged or not a Parquet file"):
        read_insert_binlog(good[:-12], name="files/insert_log/1/2/10/100/7")
    flipped = bytearray(good)
    flipped[60] ^= 0xFF
    with pytest.raises(BinlogError, match="damaged"):
        read_insert_binlog(bytes(flipped), name="x")
    with pytest.raises(BinlogError, match="<bytes>"):
        read_insert_binlog(b"hello")
    assert issubclass(BinlogError, ValueError)


def test_damaged_file_on_disk_names_its_path(tmp_path):
    """For a path the error names the path."""
    bad = tmp_path / "7"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(BinlogError) as info:
        read_delta_log(bad)
    assert str(bad) in str(info.value) and "\n" not in str(info.value)


def test_foreign_parquet_and_wrong_kind_are_refused():
    """A Parquet file without our marker, or a delta log read as an insert binlog, is not accepted."""
    sink = io.BytesIO()
    pq.write_table(pa.table({"pk": [1]}), sink)
    with pytest.raises(BinlogError, match="not a milvus-edu binlog"):
        read_insert_binlog(sink.getvalue(), name="foreign")
    with pytest.raises(BinlogError, match="a 'delta' log, expected a 'insert' log"):
        read_insert_binlog(_encoded().delta_blob.value, name="d")


def test_insert_data_without_rows_is_refused():
    """Ports storage_serializer_test ``with_empty_data`` at the codec level: ``zero or negative row num``."""
    cache = MetaCache(1, "ch")
    pack = SyncPack(1, 2, 10, "ch", insert_data=(InsertData(),), batch_rows=0)
    with pytest.raises(ParameterInvalidError, match="zero or negative row num"):
        StorageSerializer(cache).encode_buffer(pack)


def test_a_pk_binlogs_memory_size_is_go_s_field_data_size():
    """``Int64FieldData.GetMemorySize`` is 8 bytes a row, ``StringFieldData``'s each string's length plus 16, and
    each chunk adds its Nullable flag byte; a delta log counts its keys the same way, plus 8 bytes a timestamp."""
    cache = MetaCache(1, "ch")
    ints = SyncPack(1, 2, 10, "ch", insert_data=(InsertData((1, 2, 3), (5, 5, 5)), InsertData((4, 9), (6, 6))),
                    batch_rows=5)
    assert StorageSerializer(cache).encode_buffer(ints).binlog_blobs[PK_FIELD_ID].memory_size == 8 * 5 + 2
    strings = SyncPack(1, 3, 10, "ch", insert_data=(InsertData(("ab", "c"), (5, 5)),), batch_rows=2)
    assert StorageSerializer(cache).encode_buffer(strings).binlog_blobs[PK_FIELD_ID].memory_size == 18 + 17 + 1
    deletes = SyncPack(1, 2, 10, "ch", delete_data=DeleteData(("héllo",), (7,)))
    assert StorageSerializer(cache).encode_buffer(deletes).delta_blob.memory_size == 6 + 16 + 8


def test_mixed_or_mismatched_rows_are_refused():
    """pks of two types, or pks and timestamps of different lengths, are a ``ValueError`` saying what to fix."""
    cache = MetaCache(1, "ch")
    mixed = SyncPack(1, 2, 10, "ch", insert_data=(InsertData((1, "a"), (1, 2)),), batch_rows=2)
    with pytest.raises(ValueError, match="all int or all str"):
        StorageSerializer(cache).encode_buffer(mixed)
    booleans = SyncPack(1, 2, 10, "ch", insert_data=(InsertData((True, False), (1, 2)),), batch_rows=2)
    with pytest.raises(ValueError, match="all int or all str"):  # a bool is an int to Python, not a Milvus pk
        StorageSerializer(cache).encode_buffer(booleans)
    short = SyncPack(1, 2, 10, "ch", insert_data=(InsertData((1, 2), (1,)),), batch_rows=2)
    with pytest.raises(ValueError, match="2 pks but 1 timestamps"):
        StorageSerializer(cache).encode_buffer(short)
    bad_delete = SyncPack(1, 2, 10, "ch", delete_data=DeleteData((1, 2), (1,)))
    with pytest.raises(ValueError, match="pk and ts should have same length in delta log, but get 2 and 1"):
        StorageSerializer(cache).encode_buffer(bad_delete)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(0, (1 << 63) - 1)),
                min_size=1, max_size=40))
def test_any_int64_rows_round_trip(rows):
    """Every int64 pk and timestamp comes back exactly, in order, through pyarrow."""
    pks, ts = zip(*rows)
    encoded = _encoded(pks=pks, ts=ts, deletes=(pks, ts))
    assert read_insert_binlog(encoded.binlog_blobs[100].value).columns["pk"] == pks
    assert read_insert_binlog(encoded.binlog_blobs[1].value).columns["Timestamp"] == ts
    assert read_delta_log(encoded.delta_blob.value).columns == {"pk": pks, "ts": ts}
