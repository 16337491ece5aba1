"""Run the sinks of a run in a second process, so the simulation and the sinks use two cores.

Writing the run folder (Parquet and JSON lines) and running the checkers and summaries costs about
as much as simulating. :class:`SinkProcess` is one batch sink for the :class:`~.recorder.Recorder`:
it sends each :class:`~.recorder.RowBatch` the recorder hands it (the buffered row tuples, grouped
by layout) down a pipe to a child process. The child rebuilds the same batch and gives it to the real
sinks: the file sinks it opens itself, and the checkers and summaries it received. On
:meth:`SinkProcess.close` the child closes them and sends the checkers and summaries back, with the
state they reached, so the caller reads their results as if they had run at home.

The child does exactly what the recorder would have done in process (``write_batch`` for a batch
sink, ``write`` of every row of its kinds, in ``seq`` order, for a row sink), so the files are byte
for byte the same (``tests/test_sink_process.py``). The pipe holds at most one batch in flight: when
the child falls behind, the simulation waits for it, and memory stays bounded.

The child is forked (Linux only: :func:`available`); elsewhere the sinks run in process. An error in
a sink is raised again in the parent (at the next batch, or on close) with the child's message.
"""

from __future__ import annotations

import gc
import marshal
import multiprocessing
import pickle
import sys
import traceback
from collections.abc import Callable, Sequence

from .recorder import Layout, RowBatch

#: What a sink factory is: called in the child to open a sink there (a file sink opens its file).
SinkFactory = Callable[[], object]

_BATCH, _CLOSE = "batch", "close"
#: The first byte of a message on the pipe: how the rest is encoded. A batch holds only what
#: ``marshal`` writes (tuples of str, int, float, None and flat dicts), and marshal writes it about
#: three times faster than pickle; anything else goes by pickle.
_MARSHAL, _PICKLE = b"m", b"p"


def _encode(message: tuple) -> bytes:
    try:
        return _MARSHAL + marshal.dumps(message)
    except ValueError:  # a value marshal cannot write
        return _PICKLE + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _decode(data: bytes) -> tuple:
    if data[:1] == _MARSHAL:
        return marshal.loads(memoryview(data)[1:])
    return pickle.loads(memoryview(data)[1:])


def available() -> bool:
    """Whether a sink process can be used here: ``fork`` exists and is safe (Linux)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


class SinkProcessError(RuntimeError):
    """A sink failed in the sink process (the message is the child's error)."""


def _feed(sink, batch: RowBatch) -> None:
    """Give ``batch`` to ``sink`` as the recorder would: in bulk, or row by row (its kinds only)."""
    if hasattr(sink, "write_batch"):
        sink.write_batch(batch)
    else:
        write = sink.write
        for row in batch.rows(getattr(sink, "kinds", None)):
            write(row)


def _widen(conn, size: int = 1 << 20) -> None:
    """Let the pipe hold a whole batch (about 0.5 MB) instead of Linux's default 64 KB, so the
    parent hands a batch over and goes on simulating while the child still works on the one before."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), fcntl.F_SETPIPE_SZ, size)
    except (ImportError, AttributeError, OSError):
        pass  # a smaller pipe only means more waiting


def _child(conn, factories: Sequence[SinkFactory], kept: list, reply) -> None:
    """The sink process: open the file sinks, feed every batch to every sink, send ``kept`` back on close."""
    # Everything inherited from the parent lives as long as this process: the collector need not scan
    # it (and touching it would copy the parent's pages). The sinks allocate little that forms cycles.
    gc.freeze()
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    error = None
    layouts: dict[tuple[str, ...], Layout] = {}
    try:
        sinks = [make() for make in factories] + list(kept)
    except BaseException:  # the files could not be opened: report it on close
        sinks, error = [], traceback.format_exc(limit=3)
    try:
        while True:
            message = _decode(conn.recv_bytes())
            if message[0] == _CLOSE:
                break
            if error is not None:
                continue  # drain: the parent learns of the error on close
            _, groups, first_seq, size, run_id = message
            try:
                batch_groups = {}
                for key, values in groups:
                    layout = layouts.get(key)
                    if layout is None:
                        layout = layouts[key] = Layout(key[0], key[1:])
                    batch_groups[layout] = values
                batch = RowBatch(batch_groups, first_seq, size, run_id)
                for sink in sinks:
                    _feed(sink, batch)
            except BaseException:
                error = traceback.format_exc(limit=3)
        if error is None:
            try:
                for sink in sinks:
                    sink.close()
            except BaseException:
                error = traceback.format_exc(limit=3)
        outcome = ("error", error) if error is not None else ("ok", kept)
        reply.send_bytes(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        conn.close()
        reply.close()


class SinkProcess:
    """A batch sink that runs other sinks in a forked child process (see the module docs).

    ``factories`` open sinks in the child (``functools.partial(ParquetSink, path, ...)``): a sink
    that owns a file must be opened where it is written. ``kept`` are sinks whose state the caller
    wants back (checkers, summaries): after :meth:`close`, :attr:`kept` holds the child's copies,
    in the same order. Until then, the objects given stay untouched.
    """

    def __init__(self, factories: Sequence[SinkFactory] = (), kept: Sequence[object] = ()):
        if not available():
            raise RuntimeError("a sink process needs fork (Linux); run the sinks in process instead")
        self.kept = list(kept)
        context = multiprocessing.get_context("fork")
        batches_in, self._conn = context.Pipe(duplex=False)  # parent -> child: the batches
        self._reply, reply_out = context.Pipe(duplex=False)  # child -> parent: the outcome, on close
        _widen(self._conn)
        self._process = context.Process(target=_child, args=(batches_in, list(factories), self.kept, reply_out),
                                        name="milvus-edu-sinks", daemon=True)
        self._process.start()
        batches_in.close()
        reply_out.close()
        self._closed = False

    def write_batch(self, batch: RowBatch) -> None:
        """Send ``batch`` to the child (waits while the child is still busy with the one before)."""
        groups = [((layout.kind, *layout.names), values) for layout, values in batch.groups.items()]
        payload = _encode((_BATCH, groups, batch.first_seq, batch.size, batch.run_id))
        try:
            self._conn.send_bytes(payload)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._fail("the sink process ended before the run did")

    def close(self) -> None:
        """Let the child close its sinks; take back the ``kept`` sinks' final state."""
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.send_bytes(_encode((_CLOSE,)))
            status, value = pickle.loads(self._reply.recv_bytes())
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._fail("the sink process ended before the run did")
        finally:
            self._conn.close()
            self._reply.close()
            self._process.join()
        if status == "error":
            raise SinkProcessError(f"a sink failed in the sink process:\n{value}")
        self.kept = value

    def abort(self) -> None:
        """Stop the child at once (the run failed): files it was writing stay as ``*.partial``."""
        if self._closed:
            return
        self._closed = True
        self._conn.close()
        self._reply.close()
        self._process.terminate()
        self._process.join()

    def _fail(self, why: str) -> None:
        self._closed = True
        self._conn.close()
        self._reply.close()
        self._process.join()
        code = self._process.exitcode
        raise SinkProcessError(f"{why} (exit code {code}); run again, or with sink_process=False to run the "
                               "sinks in process") from None
