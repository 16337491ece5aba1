"""Run the sinks of a run in a second process, so the simulation and the sinks use two cores.

Writing the run folder (Parquet and JSON lines) and running the checkers and summaries costs about
as much as simulating. :class:`SinkProcess` is one batch sink for the :class:`~.recorder.Recorder`:
it sends each :class:`~.recorder.RowBatch` the recorder hands it (the buffered row tuples, grouped
by layout) down a pipe to a child process. The child rebuilds the same batch and gives it to the real
sinks: the file sinks it opens itself, and the checkers and summaries it received. On
:meth:`SinkProcess.close` the child closes them and sends the checkers and summaries back, with the
state they reached, so the caller reads their results as if they had run at home. So checkers and
summaries must be picklable (plain attributes, no lambdas).

The child does exactly what the recorder would have done in process (``write_batch`` for a batch
sink, ``write`` of every row of its kinds, in ``seq`` order, for a row sink), so the files are byte
for byte the same (``tests/test_sink_process.py``). The pipe holds about one batch (1 MB): when the
child falls behind, the simulation waits for it, and memory stays bounded.

Failures:

* a sink that raises in the child stops the child at once; the parent raises the same exception
  (with the child's traceback as a note) at its next batch, or on close;
* the child dies (killed): the parent raises :class:`SinkProcessError`;
* the parent dies: the child reads the end of its pipe and exits, leaving the files it was writing
  as ``*.partial``, as a crashed run in one process would; Ctrl-C is the parent's to handle (the
  child ignores it, and is stopped by :meth:`SinkProcess.abort`).

The child is forked (Linux only, and not from a daemonic process such as a ``multiprocessing.Pool``
worker: :func:`available`); elsewhere the sinks run in process.

A short run is not worth a second process: forking, the child's first touches of the pages it shares
with the parent, and the hand-over at close cost a run 30-40 ms of CPU and, on a busy machine, more in
waiting, while its sinks have less than that to do. With ``hold_rows``, the batches are held in the
parent until that many rows came; a run that closes before runs its sinks in process, at close, and
forks no child. ``simulate`` holds :data:`HOLD_ROWS`; measured by ``benchmarks/bench_sim.py`` on the
shared 2-core machine, a run of 1 simulated second of insert-then-search then takes 13-15 ms instead of
33-54 ms, and its 60-s run (about 9,000 rows) went from 1/38-1/48 of bare SimPy's rate to 1/28.
"""

from __future__ import annotations

import gc
import marshal
import multiprocessing
import pickle
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence

from .recorder import BATCH_ROWS, Layout, RowBatch

#: What a sink factory is: called in the child to open a sink there (a file sink opens its file).
SinkFactory = Callable[[], object]

_BATCH, _CLOSE = "batch", "close"
#: The first byte of a message on the pipe: how the rest is encoded. A batch holds only what
#: ``marshal`` writes (tuples of str, int, float, None and flat dicts), and marshal writes it about
#: three times faster than pickle; anything else goes by pickle. (marshal would write an object with
#: the buffer protocol, such as a numpy scalar, as bytes: ``Recorder.emit`` turns numpy scalars
#: into Python ones before they are buffered, and bound emitters take plain Python values.)
_MARSHAL, _PICKLE = b"m", b"p"
#: Rows ``simulate`` holds before it forks the sink process: two Parquet row groups (see the module docs).
HOLD_ROWS = 2 * BATCH_ROWS


def available() -> bool:
    """Whether a sink process can be used here: ``fork`` exists and is safe (Linux), and this
    process may start children (a daemonic one, such as a ``multiprocessing.Pool`` worker, may not)."""
    return (sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


class SinkProcessError(RuntimeError):
    """The sink process failed in a way that has no exception of its own (it died, or its error could
    not be sent back); the message says what happened."""


def _encode(message: tuple) -> bytes:
    try:
        return _MARSHAL + marshal.dumps(message)
    except ValueError:  # a value marshal cannot write
        return _PICKLE + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _decode(data: bytes) -> tuple:
    if data[:1] == _MARSHAL:
        return marshal.loads(memoryview(data)[1:])
    return pickle.loads(memoryview(data)[1:])


def _feed(sink, batch: RowBatch) -> None:
    """Give ``batch`` to ``sink`` as the recorder would: in bulk, or row by row (its kinds only)."""
    if hasattr(sink, "write_batch"):
        sink.write_batch(batch)
    else:
        write = sink.write
        for row in batch.rows(getattr(sink, "kinds", None)):
            write(row)


def _widen(conn, size: int = 1 << 20) -> None:
    """Let the pipe hold a whole batch (0.4-0.8 MB) instead of Linux's default 64 KB, so the
    parent hands a batch over and goes on simulating while the child still works on the one before."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), fcntl.F_SETPIPE_SZ, size)
    except (ImportError, AttributeError, OSError):
        pass  # a smaller pipe only means more waiting


def _failure(exc: BaseException) -> tuple:
    """The reply for a sink's exception: the exception itself when it pickles, and the traceback text."""
    text = "".join(traceback.format_exception(exc, limit=-4))
    try:
        payload = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(payload)  # some exceptions pickle but cannot be rebuilt
    except Exception:
        payload = None
    return ("error", text, payload)


def _child(conn, factories: Sequence[SinkFactory], kept: list, reply, parent_ends: Sequence) -> None:
    """The sink process: open the file sinks, feed every batch to every sink, send ``kept`` back on close.

    On the first error it replies with it and stops reading, so the parent learns at its next send.
    """
    for end in parent_ends:  # the parent's ends of the pipes: without them, the parent's exit is an EOF here
        end.close()
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which stops this process
    except ValueError:  # not the main thread (cannot happen after fork, which leaves one thread)
        pass
    # Everything inherited from the parent lives as long as this process: the collector need not scan
    # it (and touching it would copy the parent's pages). The sinks allocate little that forms cycles.
    gc.freeze()
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    layouts: dict[tuple[str, ...], Layout] = {}
    try:
        try:
            sinks = [make() for make in factories] + list(kept)
            while True:
                message = _decode(conn.recv_bytes())
                if message[0] == _CLOSE:
                    break
                _, groups, first_seq, size, run_id = message
                batch_groups = {}
                for key, values in groups:
                    layout = layouts.get(key)
                    if layout is None:
                        layout = layouts[key] = Layout(key[0], key[1:])
                    batch_groups[layout] = values
                batch = RowBatch(batch_groups, first_seq, size, run_id)
                for sink in sinks:
                    _feed(sink, batch)
            for sink in sinks:
                sink.close()
        except EOFError:
            return  # the parent is gone: leave the files unfinished
        except BaseException as exc:  # a sink failed: tell the parent now
            try:
                reply.send_bytes(pickle.dumps(_failure(exc), protocol=pickle.HIGHEST_PROTOCOL))
            except OSError:
                pass  # the parent is gone too
            return
        try:
            outcome = pickle.dumps(("ok", kept), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            outcome = pickle.dumps(("error", "the checkers and summaries could not be sent back from the sink "
                                             f"process ({exc}); give them plain, picklable attributes", None))
        reply.send_bytes(outcome)
    finally:
        conn.close()
        reply.close()


class SinkProcess:
    """A batch sink that runs other sinks in a forked child process (see the module docs).

    ``factories`` open sinks in the child (``functools.partial(ParquetSink, path, ...)``): a sink
    that owns a file must be opened where it is written. ``kept`` are sinks whose state the caller
    wants back (checkers, summaries; they must pickle): after :meth:`close`, :attr:`kept` holds the
    child's copies, in the same order. Until then, the objects given stay untouched. ``hold_rows``:
    fork only once that many rows came (0: at once); a run that closes before runs the sinks in
    process, and :attr:`kept` then holds the objects given, as they ended.
    """

    def __init__(self, factories: Sequence[SinkFactory] = (), kept: Sequence[object] = (), hold_rows: int = 0):
        if not available():
            raise RuntimeError("a sink process needs fork (Linux) and a process that may start children; "
                               "run the sinks in process instead")
        self.kept = list(kept)
        self._factories = list(factories)
        self._hold_rows = hold_rows
        self._held: list[RowBatch] = []  # batches not yet sent: the child is not forked yet
        self._held_size = 0
        self._process = None
        self._closed = False
        self.exitcode: int | None = None
        if hold_rows <= 0:
            self._start()

    def _start(self) -> None:
        """Fork the child and send it the batches held so far."""
        context = multiprocessing.get_context("fork")
        batches_in, self._conn = context.Pipe(duplex=False)  # parent -> child: the batches
        self._reply, reply_out = context.Pipe(duplex=False)  # child -> parent: an error, or the outcome
        _widen(self._conn)
        self._process = context.Process(
            target=_child, args=(batches_in, self._factories, self.kept, reply_out, (self._conn, self._reply)),
            name="milvus-edu-sinks", daemon=True)
        with warnings.catch_warnings():
            # Python 3.12+ warns that forking a process with threads (a Jupyter kernel) may deadlock; the
            # child only runs this module's loop, which takes none of the parent threads' locks.
            warnings.filterwarnings("ignore", message=".*use of fork\\(\\) may lead to deadlocks",
                                    category=DeprecationWarning)
            self._process.start()
        batches_in.close()
        reply_out.close()
        held, self._held = self._held, []
        for batch in held:
            self._send(batch)

    def write_batch(self, batch: RowBatch) -> None:
        """Send ``batch`` to the child (waits while the child is still busy with the one before), or hold
        it while fewer than ``hold_rows`` rows came."""
        if self._process is None:
            self._held.append(batch)
            self._held_size += batch.size
            if self._held_size >= self._hold_rows:
                self._start()
            return
        self._send(batch)

    def _send(self, batch: RowBatch) -> None:
        groups = [((layout.kind, *layout.names), values) for layout, values in batch.groups.items()]
        payload = _encode((_BATCH, groups, batch.first_seq, batch.size, batch.run_id))
        try:
            self._conn.send_bytes(payload)
        except (BrokenPipeError, ConnectionResetError):
            self._finish_failed()

    def close(self) -> None:
        """Let the child close its sinks; take back the ``kept`` sinks' final state."""
        if self._closed:
            return
        if self._process is None:  # a short run: its sinks run here (the files are the same)
            self._closed = True
            sinks = [make() for make in self._factories] + self.kept
            held, self._held = _joined(self._held), []
            for batch in held:
                for sink in sinks:
                    _feed(sink, batch)
            for sink in sinks:
                sink.close()
            return
        try:
            self._conn.send_bytes(_encode((_CLOSE,)))
        except (BrokenPipeError, ConnectionResetError):
            self._finish_failed()
        reply = self._read_reply()
        self._release()
        if reply[0] != "ok":
            _raise(reply, self.exitcode)
        self.kept = reply[1]

    def abort(self) -> None:
        """Stop the child at once (the run failed): files it was writing stay as ``*.partial``."""
        if self._closed:
            return
        if self._process is None:  # nothing was opened
            self._closed, self._held = True, []
            return
        self._process.terminate()
        self._release()

    def _read_reply(self) -> tuple:
        try:
            return pickle.loads(self._reply.recv_bytes())
        except (EOFError, ConnectionResetError):
            return ("died", None, None)

    def _finish_failed(self) -> None:
        """The child stopped reading: it failed (its reply says how) or it died."""
        reply = self._read_reply()
        self._release()
        _raise(reply, self.exitcode)

    def _release(self) -> None:
        """Close the pipes, wait for the child, free its resources (a long session runs many)."""
        self._closed = True
        self._conn.close()
        self._reply.close()
        self._process.join()
        #: The child's exit status once it ended (negative: killed by that signal).
        self.exitcode = self._process.exitcode
        self._process.close()


def _joined(batches: list[RowBatch]) -> list[RowBatch]:
    """Consecutive batches as one (each layout's tuples one after another, in ``seq`` order): a sink works
    through one large batch faster than through many small ones (Arrow's and the dispatch's costs per batch)."""
    if len(batches) <= 1:
        return batches
    groups: dict[Layout, list[tuple]] = {}
    for batch in batches:
        for layout, values in batch.groups.items():
            groups.setdefault(layout, []).extend(values)
    first = batches[0]
    return [RowBatch(groups, first.first_seq, sum(batch.size for batch in batches), first.run_id)]


def _raise(reply: tuple, exitcode: int | None) -> None:
    status, text, payload = reply
    if status == "died":
        raise SinkProcessError(f"the sink process ended before the run did (exit code {exitcode}); "
                               "run the scenario again") from None
    exc = pickle.loads(payload) if payload is not None else None
    if isinstance(exc, BaseException):
        exc.add_note(f"(raised in the sink process)\n{text}")
        raise exc
    raise SinkProcessError(text.strip().splitlines()[-1] if text else "a sink failed in the sink process")
