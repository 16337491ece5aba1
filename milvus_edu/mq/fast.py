"""The message queue's fast paths: code written a second time for speed, each beside its readable form.

Every insert of a simulation hashes its keys to shards and builds a message per vchannel, so these run
hundreds of thousands of times in a long run. Each function here gives exactly what its readable form
gives (``tests/test_speed_fast_paths.py`` compares them with hypothesis); read the readable form to learn
what it does. ``benchmarks/fast_path_gains.py`` measures what each saves by putting the readable form back
for one run (the simulating process's CPU time; issue 25 keeps a fast path only when it saves at least 5%
of some family's run):

* :func:`prehash_int64`, numpy's murmur3 of many keys at once into :data:`PREHASHED`, which
  :func:`~milvus_edu.mq.hash.hash_pk_2_channels` looks up first, fed by a client's :class:`KeysHashedAhead`;
  readable form: no table (``murmur3-prehash``).
* :func:`new_insert_msg` and :func:`new_msg_position`, the DML path's messages built without the frozen
  dataclasses' per-field ``object.__setattr__``; readable form: the ``InsertMsg`` and ``MsgPosition``
  constructors (``insert-msg``).

The gains measured (``fast_path_gains.py``, TimeTick / flush / query runs) are written beside each function.
Removed after measuring: murmur3 written out for the 8 bytes of an int64 (``fast.hash32_int64``), worth 18%
of a flush run until its clients hashed their keys ahead too, then -2.4% (flush), -1.4% (TimeTick), +0.7%
(query) with ``--repeat 3`` on 2026-11-26.
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


#: ``Hash32Int64`` of keys hashed ahead by :func:`prehash_int64` (key -> hash); bounded, cleared when full.
PREHASHED: dict[int, int] = {}
PREHASHED_MAX = 1 << 16


def prehash_int64(pks: Sequence[int]) -> None:
    """Work out ``Hash32Int64`` of many int64 keys at once, for ``hash_pk_2_channels`` to look up.

    A simulated client that knows its next keys (they are sequential) hashes a few thousand with
    numpy in the time pure Python takes for a handful; an insert then finds its keys' hashes in a
    dict. The same murmur3 as :func:`milvus_edu.mq.hash.hash32_int64`, on uint32 arrays. At most
    :data:`PREHASHED_MAX` keys are kept: the table is cleared when it would overflow. Keys outside int64
    are ignored (they are refused when hashed).

    Speed: without it a flush run's simulating process takes 13% more CPU and a TimeTick run's 5% more
    (``murmur3-prehash``, ``--repeat 3``, 2026-11-26; the TimeTick and flush clients hash ahead through
    :class:`KeysHashedAhead`, the query lesson's clients insert little).
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


class KeysHashedAhead:
    """A simulated client's sequential int64 keys, hashed ahead in blocks by :func:`prehash_int64` (the
    ``murmur3-prehash`` fast path): the proxy hashes every key of every insert, and the client knows its next
    ones. Readable form: the keys alone, ``list(range(base + start, base + start + rows))``."""

    def __init__(self, block: int = 4096):
        self.block = block
        self._hashed: tuple[int | None, int] = (None, 0)  # (base, end): the keys up to base + end - 1 are hashed

    def keys(self, base: int, start: int, rows: int) -> list[int]:
        """The keys ``base + start`` .. ``base + start + rows - 1``, hashing the next block first when they are
        not hashed yet (``base`` is the client's key range, which a proxy's new server id moves)."""
        hashed_base, end = self._hashed
        if hashed_base != base or start + rows > end:
            end = start + max(self.block, rows)
            prehash_int64(range(base + start, base + end))
            self._hashed = (base, end)
        return list(range(base + start, base + start + rows))


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
