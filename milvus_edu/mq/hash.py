"""Sharding hashes: which DML channel a primary key goes to.

Models ``pkg/util/typeutil/hash.go`` (Milvus 2.5): ``Hash32Bytes``, ``Hash32Uint64``, ``Hash32Int64``,
``Hash32String``, ``HashString2Uint32`` and ``HashPK2Channels``. Milvus uses the
``spaolacci/murmur3`` package (MurmurHash3 x86_32) and Go's ``hash/crc32`` (IEEE polynomial); here
murmur3 is written out in pure Python and crc32 is the standard library's ``zlib.crc32``, which is
the same IEEE checksum.

Simplification: ``HashPK2Channels`` takes Python ints and strs instead of ``schemapb.IDs``; each key is
hashed by its own type, so a mixed list (impossible in Milvus) is accepted.

Every insert of a simulation hashes its keys, so ``HashPK2Channels`` takes one fast path, kept with its
measured gain in :mod:`milvus_edu.mq.fast`: keys hashed ahead by a client (``fast.prehash_int64``) are
looked up; the others are hashed here by :func:`hash32_int64`, which is what the table holds.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from . import fast

_MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
#: ``substringLengthForCRC``: a string key is hashed on its first 100 bytes only.
SUBSTRING_LENGTH_FOR_CRC = 100


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _mix_k(k: int) -> int:
    k = (k * _C1) & _MASK32
    k = _rotl32(k, 15)
    return (k * _C2) & _MASK32


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` (what ``murmur3.New32WithSeed(seed).Sum32()`` returns)."""
    h = seed & _MASK32
    n_blocks = len(data) // 4
    for i in range(n_blocks):
        h ^= _mix_k(int.from_bytes(data[4 * i : 4 * i + 4], "little"))
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & _MASK32
    tail = data[4 * n_blocks :]
    if tail:
        # The tail bytes are read little-endian, like a short last block.
        h ^= _mix_k(int.from_bytes(tail, "little"))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def hash32_bytes(b: bytes) -> int:
    """``Hash32Bytes``: murmur3 x86_32 with seed 0, top bit cleared (``& 0x7fffffff``)."""
    return murmur3_32(bytes(b), 0) & 0x7FFFFFFF


def hash32_uint64(v: int) -> int:
    """``Hash32Uint64``: ``Hash32Bytes`` of the 8-byte little-endian encoding (``common.Endian``)."""
    if not 0 <= v <= 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"{v} is not a uint64; pass a value in [0, 2**64)")
    return hash32_bytes(v.to_bytes(8, "little"))


def hash32_int64(v: int) -> int:
    """``Hash32Int64``: ``Hash32Uint64(uint64(v))``, so a negative key hashes its two's complement."""
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise ValueError(f"{v} is not an int64; Milvus primary keys are 64-bit signed integers")
    return hash32_uint64(v & 0xFFFFFFFFFFFFFFFF)


def hash32_string(s: str) -> int:
    """``Hash32String``: ``Hash32Bytes`` of the UTF-8 bytes."""
    return hash32_bytes(s.encode("utf-8"))


def hash_string_2_uint32(v: str) -> int:
    """``HashString2Uint32``: crc32 (IEEE) of the first 100 bytes of the UTF-8 encoding.

    Go slices the string's bytes, so a multi-byte character may be cut at byte 100; so is it here.
    """
    return zlib.crc32(v.encode("utf-8")[:SUBSTRING_LENGTH_FOR_CRC]) & _MASK32


def hash_pk_2_channels(pks: Sequence[int | str], shard_names: Sequence[str]) -> list[int]:
    """``HashPK2Channels``: the shard index of every primary key.

    An int key uses ``Hash32Int64(pk) % len(shards)``, a string key ``HashString2Uint32(pk) %
    len(shards)``. Only the number of shard names matters, as in Go.
    """
    num_shard = len(shard_names)
    if num_shard == 0:
        raise ValueError("no shard names given; pass the collection's vchannels (at least one)")
    out = []
    prehashed = fast.PREHASHED
    for pk in pks:
        if type(pk) is int and _INT64_MIN <= pk <= _INT64_MAX:
            value = prehashed.get(pk)
            if value is None:
                value = hash32_int64(pk)
        elif isinstance(pk, bool) or not isinstance(pk, (int, str)):
            raise ValueError(f"primary key {pk!r} is neither int nor str; Milvus keys are Int64 or VarChar")
        else:
            value = hash_string_2_uint32(pk) if isinstance(pk, str) else hash32_int64(pk)
        out.append(value % num_shard)
    return out
