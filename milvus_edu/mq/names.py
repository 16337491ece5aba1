"""Channel names: physical DML channels (pchannels) and the virtual channels (vchannels) on them.

Models the naming helpers of Milvus 2.5: ``paramtable`` ``chanNamePrefix`` (``ComponentParam``),
``internal/rootcoord/dml_channels.go`` (``getChannelName``, ``genChannelNames``) and
``pkg/util/funcutil/func.go`` (``GetVirtualChannel``, ``IsPhysicalChannel``, ``ToPhysicalChannel``,
``GetCollectionIDFromVChannel``).

A pchannel is one MQ topic, ``by-dev-rootcoord-dml_<i>``; a collection with N shards owns N vchannels
``<pchannel>_<collectionID>v<shardIdx>``, several of which may share one pchannel.

Simplification: ``common.preCreatedTopic`` (user-named topics) is not modelled.
"""

from __future__ import annotations

import re

from ..config import TimeTickParams

_PULSAR_PARTITION_KEYWORD = "-partition-"
# re.ASCII: Go's RE2 ``\d`` is 0-9 only, Python's would also match other Unicode digits.
_VCHANNEL_COLLECTION_RE = re.compile(r".*_(\d+)v\d+", re.ASCII)
_INT64_MAX = (1 << 63) - 1


def chan_name_prefix(params: TimeTickParams | None = None) -> str:
    """``chanNamePrefix`` formatter for the DML prefix: ``<cluster>-<rootCoordDml>`` (``by-dev-rootcoord-dml``).

    Milvus panics on a name containing ``-partition-`` (a Pulsar client bug, issue 28675).
    """
    p = params or TimeTickParams()
    prefix = f"{p.cluster_prefix}-{p.root_coord_dml}"
    if _PULSAR_PARTITION_KEYWORD in prefix:
        raise ValueError(f"channel name can not contains '-partition-' ({prefix!r}); choose another cluster prefix")
    return prefix


def get_channel_name(prefix: str, idx: int) -> str:
    """``getChannelName``: ``<prefix>_<idx>``."""
    return f"{prefix}_{idx}"


def gen_channel_names(prefix: str, num: int) -> list[str]:
    """``genChannelNames``: ``<prefix>_0 .. <prefix>_<num-1>``."""
    return [get_channel_name(prefix, i) for i in range(num)]


def dml_channel_names(params: TimeTickParams | None = None) -> list[str]:
    """Every DML pchannel rootcoord creates (``rootCoord.dmlChannelNum`` of them, 16 by default)."""
    p = params or TimeTickParams()
    return gen_channel_names(chan_name_prefix(p), p.dml_channel_num)


def get_virtual_channel(pchannel: str, collection_id: int, idx: int) -> str:
    """``GetVirtualChannel``: ``<pchannel>_<collectionID>v<idx>``."""
    return f"{pchannel}_{collection_id}v{idx}"


def is_physical_channel(channel: str) -> bool:
    """``IsPhysicalChannel``: true unless the part after the last ``_`` contains a ``v``."""
    i = channel.rfind("_")
    if i == -1:
        return True
    return "v" not in channel[i + 1 :]


def to_physical_channel(vchannel: str) -> str:
    """``ToPhysicalChannel``: drop the last ``_...v...`` part; a pchannel is returned unchanged."""
    if is_physical_channel(vchannel):
        return vchannel
    return vchannel[: vchannel.rfind("_")]


def _parse_int_base0(digits: str) -> int | None:
    """Go's ``strconv.ParseInt(s, 0, 64)`` on a string of decimal digits (None on error).

    Base 0 reads a leading ``0`` as octal, so ``"010"`` is 8 and ``"09"`` is an error.
    """
    if len(digits) > 1 and digits[0] == "0":
        if any(c in "89" for c in digits):
            return None
        value = int(digits, 8)
    else:
        value = int(digits)
    return value if value <= _INT64_MAX else None


def get_collection_id_from_vchannel(vchannel: str) -> int:
    """``GetCollectionIDFromVChannel``: the collection id in ``..._<id>v<idx>``, or -1.

    Faithful to Go's ``regexp`` ``.*_(\\d+)v\\d+`` (unanchored) and ``ParseInt(s, 0, 64)`` (so a
    leading zero means octal).
    """
    match = _VCHANNEL_COLLECTION_RE.search(vchannel)
    if match is None:
        return -1
    value = _parse_int_base0(match.group(1))
    return -1 if value is None else value
