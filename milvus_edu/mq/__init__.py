"""The message queue and its consumers: pchannel logs, tick-aligned msgstreams, the dispatcher.

Models ``pkg/mq/msgstream`` (``MqTtMsgStream``, the ``TsMsg`` types), ``pkg/mq/msgdispatcher``
(``Dispatcher``, ``DispatcherManager``), the sharding hashes of ``pkg/util/typeutil/hash.go`` and the channel-name helpers
of ``pkg/util/funcutil`` (Milvus 2.5). Everything here is pure: the simulator wakes a stream by
calling ``poll()`` whenever the broker reports that one of its channels grew (``Broker.watch``).
"""

from .broker import FIRST_MSG_ID, Broker
from .dispatcher import Dispatcher, Target
from .manager import DispatcherManager
from .hash import (
    hash32_bytes,
    hash32_int64,
    hash32_string,
    hash32_uint64,
    hash_pk_2_channels,
    hash_string_2_uint32,
    murmur3_32,
)
from .msg import (
    CreateCollectionMsg,
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    MsgPack,
    TimeTickMsg,
    TsMsg,
    is_dml_msg,
)
from .msgstream import MqTtMsgStream, SeekError, SubscriptionPosition
from .names import (
    chan_name_prefix,
    dml_channel_names,
    gen_channel_names,
    get_channel_name,
    get_collection_id_from_vchannel,
    get_virtual_channel,
    is_physical_channel,
    to_physical_channel,
)

__all__ = [
    "FIRST_MSG_ID",
    "Broker",
    "CreateCollectionMsg",
    "CreatePartitionMsg",
    "DeleteMsg",
    "Dispatcher",
    "DispatcherManager",
    "DropCollectionMsg",
    "DropPartitionMsg",
    "InsertMsg",
    "MqTtMsgStream",
    "MsgPack",
    "SeekError",
    "SubscriptionPosition",
    "Target",
    "TimeTickMsg",
    "TsMsg",
    "chan_name_prefix",
    "dml_channel_names",
    "gen_channel_names",
    "get_channel_name",
    "get_collection_id_from_vchannel",
    "get_virtual_channel",
    "hash32_bytes",
    "hash32_int64",
    "hash32_string",
    "hash32_uint64",
    "hash_pk_2_channels",
    "hash_string_2_uint32",
    "is_dml_msg",
    "is_physical_channel",
    "murmur3_32",
    "to_physical_channel",
]
