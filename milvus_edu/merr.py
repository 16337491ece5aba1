"""Milvus's typed errors, the few the DataNode, DataCoord and QueryNode models raise.

Models ``pkg/util/merr/errors.go`` and ``utils.go`` (Milvus 2.5): each error has Milvus's code and base
text, and the ``WrapErr...`` helpers append ``[name=value]`` fields and an optional ``"<msg>: "`` prefix
exactly as ``wrapFields`` and ``errors.Wrap`` print them, so a learner sees the message Milvus logs.
Callers test the kind with ``isinstance`` (Go: ``errors.Is``).

Simplification: no retriable flag handling, no gRPC status conversion, only the errors the models use.
"""

from __future__ import annotations


class MilvusError(Exception):
    """``milvusError``: a message and Milvus's numeric ``code``."""

    code: int = 0
    base: str = "milvus error"

    def __init__(self, *fields: tuple[str, object], msg: str = ""):
        text = self.base + "".join(f"[{name}={value}]" for name, value in fields)
        if msg:
            text = f"{msg}: {text}"
        super().__init__(text)


class ServiceNotReadyError(MilvusError):
    """``ErrServiceNotReady`` (code 1): the component is not healthy yet (or any more)."""

    code = 1
    base = "service not ready"


class CollectionNotFoundError(MilvusError):
    """``ErrCollectionNotFound`` (code 100)."""

    code = 100
    base = "collection not found"


class CollectionSchemaMismatchError(MilvusError):
    """``ErrCollectionSchemaMismatch`` (code 109): the schema the SDK sent is not the collection's current one."""

    code = 109
    base = "collection schema mismatch"


class ChannelNotFoundError(MilvusError):
    """``ErrChannelNotFound`` (code 500)."""

    code = 500
    base = "channel not found"


class ChannelNotAvailableError(MilvusError):
    """``ErrChannelNotAvailable`` (code 503): the channel's delegator cannot serve (closed, not ready)."""

    code = 503
    base = "channel not available"


class ChannelReduplicateError(MilvusError):
    """``ErrChannelReduplicate`` (code 502): a channel registered twice."""

    code = 502
    base = "channel reduplicates"


class SegmentNotFoundError(MilvusError):
    """``ErrSegmentNotFound`` (code 600)."""

    code = 600
    base = "segment not found"


class ParameterInvalidError(MilvusError):
    """``ErrParameterInvalid`` (code 1100)."""

    code = 1100
    base = "invalid parameter"


def wrap_err_service_not_ready(role: str, session_id: int, state: str, msg: str = "") -> ServiceNotReadyError:
    """``WrapErrServiceNotReady``: ``service not ready[<role>=<id>]: <state>`` (``wrapFieldsWithDesc``)."""
    err = ServiceNotReadyError()
    text = f"{ServiceNotReadyError.base}[{role}={session_id}]: {state}"
    err.args = (f"{msg}: {text}" if msg else text,)
    return err


def wrap_err_collection_not_found(collection: object, msg: str = "") -> CollectionNotFoundError:
    """``WrapErrCollectionNotFound``: ``collection not found[collection=<id>]``."""
    return CollectionNotFoundError(("collection", collection), msg=msg)


def wrap_err_collection_not_found_with_db(database: object, collection: object, msg: str = "") -> CollectionNotFoundError:
    """``WrapErrCollectionNotFoundWithDB``: ``collection not found[database=<db>][collection=<name>]``."""
    return CollectionNotFoundError(("database", database), ("collection", collection), msg=msg)


def wrap_err_collection_schema_mismatch(collection: object, msg: str = "") -> CollectionSchemaMismatchError:
    """``WrapErrCollectionSchemaMisMatch``: ``collection schema mismatch[collection=<name>]``."""
    return CollectionSchemaMismatchError(("collection", collection), msg=msg)


def wrap_err_channel_not_found(name: str, msg: str = "") -> ChannelNotFoundError:
    """``WrapErrChannelNotFound``: ``channel not found[channel=<name>]``."""
    return ChannelNotFoundError(("channel", name), msg=msg)


def wrap_err_channel_not_available(name: str, msg: str = "") -> ChannelNotAvailableError:
    """``WrapErrChannelNotAvailable``: ``<msg>: channel not available[channel=<name>]``."""
    return ChannelNotAvailableError(("channel", name), msg=msg)


def wrap_err_channel_reduplicate(name: str, msg: str = "") -> ChannelReduplicateError:
    """``WrapErrChannelReduplicate``: ``channel reduplicates[channel=<name>]``."""
    return ChannelReduplicateError(("channel", name), msg=msg)


def wrap_err_segment_not_found(segment_id: int, msg: str = "") -> SegmentNotFoundError:
    """``WrapErrSegmentNotFound``: ``segment not found[segment=<id>]``."""
    return SegmentNotFoundError(("segment", segment_id), msg=msg)


def wrap_err_parameter_invalid_msg(text: str) -> ParameterInvalidError:
    """``WrapErrParameterInvalidMsg``: ``<text>: invalid parameter``."""
    return ParameterInvalidError(msg=text)
