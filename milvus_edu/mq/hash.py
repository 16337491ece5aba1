"""Sharding hashes: which DML channel a primary key goes to.

Models ``pkg/util/typeutil/hash.go`` (Milvus 2.5): ``Hash32Bytes``, ``Hash32Uint64``, ``Hash32Int64``,
``Hash32String``, ``HashString2Uint32`` and ``HashPK2Channels``. Milvus uses the
``spaolacci/murmur3`` package (MurmurHash3 x86_32) and Go's ``hash/crc32`` (IEEE polynomial); here
murmur3 is written out in pure Python and crc32 is the standard library's ``zlib.crc32``, which is
the same IEEE checksum.

Simplification: ``HashPK2Channels`` takes Python ints and strs instead of ``schemapb.IDs``; each key is
hashed by its own type, so a mixed list (impossible in Milvus) is accepted.

Every insert of a simulation hashes its keys, so ``HashPK2Channels`` uses :func:`_hash32_int64_unrolled`,
murmur3 written out for exactly the 8 bytes of an int64 (``tests/test_mq_hash.py`` proves it equal to
:func:`hash32_int64` on any int64), and the TimeTick clients hash their next keys ahead with numpy
(:func:`prehash_int64`). Speed, measured against the readable :func:`hash32_int64` by
``benchmarks/fast_path_gains.py``: the written-out murmur3 saves a flush run's simulating process 8% of its CPU
(``murmur3-unrolled``), hashing ahead saves a TimeTick run's 13% (``murmur3-prehash``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

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


#: The mixed second block of recent keys, by the key's upper 32 bits: keys that are close together
#: share them, so each is mixed once. Bounded, so random 64-bit keys cannot grow it without end.
_HIGH_BLOCKS: dict[int, int] = {}
_HIGH_BLOCKS_MAX = 4096


def _high_block(high: int) -> int:
    k = (high * _C1) & _MASK32
    k = (((k << 15) | (k >> 17)) & _MASK32) * _C2 & _MASK32
    if len(_HIGH_BLOCKS) < _HIGH_BLOCKS_MAX:
        _HIGH_BLOCKS[high] = k
    return k


def _hash32_int64_unrolled(v: int) -> int:
    """:func:`hash32_int64` of an int64 ``v``, with murmur3's two blocks and finalisation inlined."""
    u = v & 0xFFFFFFFFFFFFFFFF
    k = ((u & _MASK32) * _C1) & _MASK32
    k = (((k << 15) | (k >> 17)) & _MASK32) * _C2 & _MASK32
    h = ((k << 13) | (k >> 19)) & _MASK32  # seed 0: h ^= k leaves k
    h = (h * 5 + 0xE6546B64) & _MASK32
    high = u >> 32
    k = _HIGH_BLOCKS.get(high)
    h ^= _high_block(high) if k is None else k
    h = ((h << 13) | (h >> 19)) & _MASK32
    h = (h * 5 + 0xE6546B64) & _MASK32
    h ^= 8  # the length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h & 0x7FFFFFFF


#: ``Hash32Int64`` of keys hashed ahead by :func:`prehash_int64` (key -> hash); bounded, cleared when full.
_PREHASHED: dict[int, int] = {}
_PREHASHED_MAX = 1 << 16


def prehash_int64(pks: Sequence[int]) -> None:
    """Work out ``Hash32Int64`` of many int64 keys at once, for :func:`hash_pk_2_channels` to look up.

    A simulated client that knows its next keys (they are sequential) hashes a few thousand with
    numpy in the time pure Python takes for a handful; an insert then finds its keys' hashes in a
    dict. The same murmur3 as :func:`_hash32_int64_unrolled`, on uint32 arrays (``tests/test_mq_hash.py``
    compares them). At most ``2**16`` keys are kept: the table is cleared when it would overflow.
    Keys outside int64 are ignored (they are refused when hashed).
    """
    if isinstance(pks, range) and (not pks or _INT64_MIN <= min(pks[0], pks[-1])
                                   and max(pks[0], pks[-1]) <= _INT64_MAX):
        keys = pks  # every key an int64 (a client's next keys): no need to look at each one
    else:
        keys = [pk for pk in pks if type(pk) is int and _INT64_MIN <= pk <= _INT64_MAX]
    if not keys:
        return
    if len(_PREHASHED) + len(keys) > _PREHASHED_MAX:
        _PREHASHED.clear()
    u = np.array(keys, dtype=np.int64).view(np.uint64)
    c1, c2 = np.uint32(_C1), np.uint32(_C2)

    def mix(block):  # murmur3's k mixing: k * c1, rotl 15, * c2
        k = block * c1
        k = (k << np.uint32(15)) | (k >> np.uint32(17))
        return k * c2

    def rotl13_step(h):  # h = rotl(h, 13) * 5 + 0xE6546B64
        h = (h << np.uint32(13)) | (h >> np.uint32(19))
        return h * np.uint32(5) + np.uint32(0xE6546B64)

    with np.errstate(over="ignore"):
        h = rotl13_step(mix((u & np.uint64(_MASK32)).astype(np.uint32)))
        h = rotl13_step(h ^ mix((u >> np.uint64(32)).astype(np.uint32)))
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
        h &= np.uint32(0x7FFFFFFF)
    _PREHASHED.update(zip(keys, h.tolist()))


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
    prehashed = _PREHASHED
    for pk in pks:
        if type(pk) is int and _INT64_MIN <= pk <= _INT64_MAX:
            value = prehashed.get(pk)
            if value is None:
                value = _hash32_int64_unrolled(pk)
        elif isinstance(pk, bool) or not isinstance(pk, (int, str)):
            raise ValueError(f"primary key {pk!r} is neither int nor str; Milvus keys are Int64 or VarChar")
        else:
            value = hash_string_2_uint32(pk) if isinstance(pk, str) else hash32_int64(pk)
        out.append(value % num_shard)
    return out
