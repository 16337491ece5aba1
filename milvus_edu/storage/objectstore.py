"""Object storage: MinIO's role, over any ``pyarrow.fs`` file system.

Models ``internal/storage/types.go`` ``ChunkManager`` as the sync path uses it (``RootPath``,
``MultiWrite``, ``Read``, ``Exist``, ``WalkWithPrefix``, ``Remove``) with the behaviour of
``internal/storage/remote_chunk_manager.go`` (``RemoteChunkManager`` over ``minio_object_storage.go``; 2.3's
``minio_chunk_manager.go``): an object key is a ``/``-separated path that starts with the root path
(``files/insert_log/...``), and the bucket is a directory. The default is a local folder
``<dir>/a-bucket``; :meth:`ChunkManager.from_uri` takes ``file://...``, ``mock://`` (pyarrow's
in-memory file system) or any URI pyarrow understands, so a real bucket works the same way.

One rule MinIO does not enforce but Milvus relies on: a log id is never reused, so an object is never
rewritten with other bytes. ``multi_write`` refuses that loudly instead of silently replacing a file a
segment's metadata may already point at; writing the same bytes again (a retried write) is fine.

Simplification: ``WalkWithPrefix`` (2.3's ``ListWithPrefix``) is recursive only and returns the sorted keys
instead of calling a ``ChunkObjectWalkFunc`` per object, so without modification times.
Simplification: no ``Reader``/``ReadAt``/``Mmap``/``Size``/``MultiRead``/``MultiRemove``/``RemoveWithPrefix``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path

import pyarrow.fs as pafs

from .binlog import DEFAULT_BUCKET, DEFAULT_ROOT_PATH


class ObjectOverwriteError(ValueError):
    """A write would replace an existing object with different bytes (Milvus never rewrites a log id)."""


def _check_key(key: str) -> str:
    """Object keys are relative ``/`` paths without ``.``/``..`` elements (MinIO keys, not file names)."""
    if not key or key.startswith("/") or any(part in ("", ".", "..") for part in key.split("/")):
        raise ValueError(f"bad object key {key!r}: use a relative path like 'files/insert_log/1/2/3/100/7'")
    return key


#: A run folder's object store (``<run folder>/objects``) and the file that marks it as written by a run,
#: so ``--force`` may replace it and nothing else.
RUN_OBJECTS_DIR = "objects"
RUN_OBJECTS_MARKER = ".milvus-edu-run"


class ChunkManager:
    """``ChunkManager`` (MinIO's behaviour): objects under one bucket, keys starting with ``root_path``.

    ``fs`` is the bucket: keys are paths inside it.
    """

    def __init__(self, fs: pafs.FileSystem, root_path: str = DEFAULT_ROOT_PATH):
        self._fs = fs
        self._root_path = root_path

    @classmethod
    def local(cls, directory: str | Path, bucket: str = DEFAULT_BUCKET,
              root_path: str = DEFAULT_ROOT_PATH) -> "ChunkManager":
        """A bucket as the folder ``<directory>/<bucket>`` (created if missing)."""
        base = Path(directory).resolve() / bucket
        base.mkdir(parents=True, exist_ok=True)
        return cls(pafs.SubTreeFileSystem(str(base), pafs.LocalFileSystem()), root_path)

    @classmethod
    def from_uri(cls, uri: str, root_path: str = DEFAULT_ROOT_PATH) -> "ChunkManager":
        """A bucket from a URI pyarrow understands: ``file:///data/a-bucket``, ``mock://``, ``s3://a-bucket``, ...

        A local folder is created if missing.
        """
        fs, base = pafs.FileSystem.from_uri(uri)
        if isinstance(fs, pafs.LocalFileSystem):
            fs.create_dir(base, recursive=True)
        if base:
            fs = pafs.SubTreeFileSystem(base, fs)
        return cls(fs, root_path)

    @property
    def root_path(self) -> str:
        """``RootPath``: the prefix of every key the DataNode writes (``minio.rootPath``)."""
        return self._root_path

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The bucket as a pyarrow file system, for readers such as ``pyarrow.dataset`` or Spark."""
        return self._fs

    def exist(self, key: str) -> bool:
        """``Exist``: whether the object is there."""
        return self._fs.get_file_info(_check_key(key)).type == pafs.FileType.File

    def read(self, key: str) -> bytes:
        """``Read``: the object's bytes; a missing key raises ``FileNotFoundError`` naming it."""
        if not self.exist(key):
            raise FileNotFoundError(f"object not found: {key}")
        with self._fs.open_input_stream(key) as stream:
            return stream.read()

    def multi_write(self, objects: Mapping[str, bytes]) -> None:
        """``MultiWrite``: write every object, in key order (Go ranges over a map).

        An object that exists with the same bytes is left alone (a retried write); one that exists with
        other bytes raises :class:`ObjectOverwriteError` before anything of this call is written.
        """
        keys = sorted(objects)
        for key in keys:
            _check_key(key)
            if self.exist(key) and self.read(key) != bytes(objects[key]):
                raise ObjectOverwriteError(
                    f"object {key} already exists with different bytes: Milvus never rewrites a log id, "
                    "allocate a new one")
        for key in keys:
            if self.exist(key):
                continue
            parent = posixpath.dirname(key)
            if parent:
                self._fs.create_dir(parent, recursive=True)
            with self._fs.open_output_stream(key) as stream:
                stream.write(bytes(objects[key]))

    def list_with_prefix(self, prefix: str) -> list[str]:
        """``WalkWithPrefix`` (recursive): every key that starts with ``prefix`` as a string, sorted.

        As with MinIO, ``files/insert_log/1/2/3`` also matches ``files/insert_log/1/2/30/...``;
        end the prefix with ``/`` to list one folder.
        """
        if prefix.startswith("/"):
            raise ValueError(f"bad prefix {prefix!r}: keys are relative, drop the leading '/'")
        folder = posixpath.dirname(prefix)
        selector = pafs.FileSelector(folder, allow_not_found=True, recursive=True)
        infos = self._fs.get_file_info(selector)
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.startswith(prefix))

    def remove(self, key: str) -> None:
        """``Remove``: delete the object; removing a missing object is not an error (as MinIO)."""
        if self.exist(key):
            self._fs.delete_file(key)


__all__ = ["ChunkManager", "ObjectOverwriteError"]
