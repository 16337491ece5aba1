"""The message queue's fast paths: code written a second time for speed, each beside its readable form.

Every insert of a simulation hashes its keys to shards and builds a message per vchannel, so these run
hundreds of thousands of times in a long run. Each function here gives exactly what its readable form
gives (``tests/test_speed_fast_paths.py`` compares them with hypothesis); read the readable form to learn
what it does. ``benchmarks/fast_path_gains.py`` measures what each saves by putting the readable form back
for one run (the simulating process's CPU time; issue 25 keeps a fast path only when it saves at least 5%
of some family's run):

* :func:`hash32_int64`, murmur3 written out for the 8 bytes of an int64, with :data:`_HIGH_BLOCKS`, the
  mixed upper half of recent keys; readable form :func:`milvus_edu.mq.hash.hash32_int64` (``murmur3-unrolled``).
* :func:`prehash_int64`, numpy's murmur3 of many keys at once into :data:`PREHASHED`, which
  :func:`~milvus_edu.mq.hash.hash_pk_2_channels` looks up first; readable form: no table (``murmur3-prehash``).
* :func:`new_insert_msg` and :func:`new_msg_position`, the DML path's messages built without the frozen
  dataclasses' per-field ``object.__setattr__``; readable form: the ``InsertMsg`` and ``MsgPosition``
  constructors (``insert-msg``).

The gains measured (``fast_path_gains.py --repeat 2``, 2026-11-25, TimeTick / flush / query runs) are
written beside each function.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..proto import MsgPosition
from .msg import InsertMsg, _check_rows

# murmur3 x86_32's constants (as in hash.py's readable murmur3_32)
_MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

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


def hash32_int64(v: int) -> int:
    """``Hash32Int64`` of an int64 ``v`` (readable form: :func:`milvus_edu.mq.hash.hash32_int64`), with
    murmur3's two blocks and finalisation written out, and the upper block looked up.

    Speed: the readable form instead costs a flush run's simulating process 18% more CPU (``murmur3-unrolled``;
    the TimeTick clients hash ahead, and the query runs insert little)."""
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
PREHASHED: dict[int, int] = {}
PREHASHED_MAX = 1 << 16


def prehash_int64(pks: Sequence[int]) -> None:
    """Work out ``Hash32Int64`` of many int64 keys at once, for ``hash_pk_2_channels`` to look up.

    A simulated client that knows its next keys (they are sequential) hashes a few thousand with
    numpy in the time pure Python takes for a handful; an insert then finds its keys' hashes in a
    dict. The same murmur3 as :func:`hash32_int64`, on uint32 arrays. At most :data:`PREHASHED_MAX`
    keys are kept: the table is cleared when it would overflow. Keys outside int64 are ignored (they
    are refused when hashed).

    Speed: without it a TimeTick run's simulating process takes 7% more CPU (``murmur3-prehash``; only the
    TimeTick clients hash ahead).
    """
    if isinstance(pks, range) and (not pks or _INT64_MIN <= min(pks[0], pks[-1])
                                   and max(pks[0], pks[-1]) <= _INT64_MAX):
        keys = pks  # every key an int64 (a client's next keys): no need to look at each one
    else:
        keys = [pk for pk in pks if type(pk) is int and _INT64_MIN <= pk <= _INT64_MAX]
    if not keys:
        return
    if len(PREHASHED) + len(keys) > PREHASHED_MAX:
        PREHASHED.clear()
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
    PREHASHED.update(zip(keys, h.tolist()))


def new_msg_position(channel: str, msg_id: int | None, timestamp: int) -> MsgPosition:
    """``MsgPosition(channel, msg_id, timestamp)`` built without the frozen dataclass's per-field
    ``object.__setattr__`` (one per produced message). Its gain is counted with :func:`new_insert_msg`'s."""
    position = object.__new__(MsgPosition)
    position.__dict__.update(channel_name=channel, msg_id=msg_id, timestamp=timestamp, msg_group="")
    return position


def new_insert_msg(shard_name: str, collection_id: int, partition_id: int, segment_id: int, pks: tuple,
                   timestamps: tuple, payload_bytes: int, msg_id: int, source_id: int,
                   position: MsgPosition | None = None, fields: tuple | None = None) -> InsertMsg:
    """``InsertMsg(shard_name=..., ...)`` for the simulator's DML path, which builds one per vchannel of
    every insert: the same message (equal, same fields), built without the frozen dataclass's
    ``object.__setattr__`` per field. ``pks`` and ``timestamps`` must be tuples; the rows are checked
    as the constructor checks them. With the ``position`` the broker will give it,
    :meth:`~milvus_edu.mq.broker.Broker.produce` stores it as it is instead of a copy.

    Speed: with the dataclass constructors instead (for this and :func:`new_msg_position`) the simulating
    process takes 15% more CPU in a TimeTick run and 4% in a flush run (``insert-msg``)."""
    _check_rows("Insert", pks, timestamps)
    msg = object.__new__(InsertMsg)
    msg.__dict__.update(msg_id=msg_id, source_id=source_id, position=position, shard_name=shard_name,
                        collection_id=collection_id, partition_id=partition_id, segment_id=segment_id, pks=pks,
                        timestamps=timestamps, payload_bytes=payload_bytes, fields=fields)
    return msg
