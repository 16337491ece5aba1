"""How a long run shows its progress: a bar in a notebook, one line on a terminal, the time it has left.

:func:`~milvus_edu.sim.run.simulate` calls ``progress(done_s, total_s)`` as it advances (every 2% of the run, and
about every half second of wall time on a slow one). ``progress=True`` picks :func:`progress_display`: an ipywidgets
bar under the notebook cell that runs it, or a line on stderr that rewrites itself on a terminal. Either appears
only once a run has taken a second, so a short run shows nothing, and says about how long the run has left at its
pace so far: a tiny interval in the parameters or a huge rate in the options can make a run take hours, and the
display says so within a second or two. The command line shows the terminal line (:func:`terminal_line`).
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TextIO

#: A run shows nothing until it has taken this long (wall seconds): a short run would only flash a display.
SHOW_AFTER_S = 1.0
#: Past this many wall seconds left, the display says how to stop the run or make it quicker.
LONG_S = 600.0
#: Where stderr is not a terminal (a log file, a pipe), ``progress=True`` writes a line this often (wall seconds).
LOG_EVERY_S = 10.0

Progress = Callable[[float, float], None]


def wall_time_text(seconds: float) -> str:
    """``seconds`` in the largest units that read well: ``45 s``, ``12 min``, ``3 h 20 min``, ``9 days``."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 48 * 60:
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{round(seconds / 86400):,} days"


def remaining_text(elapsed_s: float, done_s: float, total_s: float) -> str:
    """What a progress display adds about the time a run has left, at the pace it kept so far: ``, about 3 min
    left``, and, when that is long, how to stop it or make it quicker."""
    if done_s <= 0 or done_s >= total_s:
        return ""
    left_s = elapsed_s * (total_s - done_s) / done_s
    text = f", about {wall_time_text(left_s)} left"
    if left_s >= LONG_S:
        text += " (Ctrl-C or the notebook's stop button stops it; a shorter duration, or longer intervals in the " \
                "parameters, make it quicker)"
    return text


def progress_text(elapsed_s: float, done_s: float, total_s: float) -> str:
    """``20% (1.0 of 5 simulated s), about 1 min left``: how far the run is, and its time left."""
    done = f"{done_s:,.1f}" if total_s < 100 else f"{done_s:,.0f}"
    return f"{done_s / total_s:4.0%} ({done} of {total_s:,.0f} simulated s){remaining_text(elapsed_s, done_s, total_s)}"


class _Display(ABC):
    """A progress callback that shows nothing until the run has taken :data:`SHOW_AFTER_S` (a run shorter than that
    shows nothing at all), then calls ``show`` with the text of every report, ``final`` on the last."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._started = clock()

    def __call__(self, done_s: float, total_s: float) -> None:
        elapsed = self._clock() - self._started
        if elapsed < SHOW_AFTER_S:
            return
        self.show(progress_text(elapsed, done_s, total_s), done_s, total_s, done_s >= total_s, elapsed)

    @abstractmethod
    def show(self, text: str, done_s: float, total_s: float, final: bool, elapsed: float) -> None:
        """Show ``text`` (how far the run is, its time left) for a report at ``done_s`` of ``total_s`` simulated s,
        ``elapsed`` wall seconds after the run started; ``final`` on the run's last report."""


class TerminalLine(_Display):
    """One line on ``stream`` that rewrites itself (``\\r``), ending with a newline when the run ends."""

    #: The line shown and not yet ended (a run stopped part-way): :func:`end_open_line` ends it.
    open: TerminalLine | None = None

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic):
        super().__init__(clock)
        self._stream = stream
        self._width = 0  # the last line's length: a shorter one is padded over it

    def show(self, text: str, done_s: float, total_s: float, final: bool, elapsed: float) -> None:
        line = f"simulating: {text}"
        padded = line.ljust(self._width)
        self._width = len(line)
        print(f"\r{padded}", end="\n" if final else "", file=self._stream, flush=True)
        TerminalLine.open = None if final else self

    def end(self) -> None:
        """End the line where it stands, so that what is printed next (an error) starts a line of its own."""
        if TerminalLine.open is self:
            TerminalLine.open = None
            print(file=self._stream, flush=True)


def end_open_line() -> None:
    """End a progress line a stopped run left open (the command line calls this before it prints an error)."""
    if TerminalLine.open is not None:
        TerminalLine.open.end()


class LogLines(_Display):
    """A line on ``stream`` every :data:`LOG_EVERY_S` and when the run ends (a log file keeps every line)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic):
        super().__init__(clock)
        self._stream = stream
        self._last = None

    def show(self, text: str, done_s: float, total_s: float, final: bool, elapsed: float) -> None:
        if final or self._last is None or elapsed - self._last >= LOG_EVERY_S:
            self._last = elapsed
            print(f"simulating: {text}", file=self._stream, flush=True)


class NotebookBar(_Display):
    """An ipywidgets bar and its label, displayed under the running cell when first shown."""

    def __init__(self, display: Callable[[object], object], clock: Callable[[], float] = time.monotonic):
        super().__init__(clock)
        self._display = display
        self.bar = self.label = None

    def show(self, text: str, done_s: float, total_s: float, final: bool, elapsed: float) -> None:
        if self.bar is None:
            import ipywidgets as w

            self.bar = w.FloatProgress(min=0.0, max=float(total_s), description="simulating")
            self.label = w.Label()
            self._display(w.HBox([self.bar, self.label]))
        self.bar.value = float(done_s)
        self.label.value = text
        if final:
            self.bar.bar_style = "success"


def notebook_display():
    """IPython's ``display`` when running in a notebook kernel, else None (a sweep's progress bar uses it too)."""
    ipython = sys.modules.get("IPython")  # a kernel has imported it; a script that never did is not in one
    if ipython is None:
        return None
    shell = ipython.get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return None
    from IPython.display import display

    return display


def terminal_line() -> Progress | None:
    """The command line's display: :class:`TerminalLine` on stderr when it is a terminal, else None (nothing)."""
    return TerminalLine(sys.stderr) if sys.stderr.isatty() else None


def progress_display() -> Progress:
    """What ``progress=True`` shows: a :class:`NotebookBar` in a notebook kernel, a :class:`TerminalLine` on a
    terminal, else :class:`LogLines` on stderr."""
    display = notebook_display()
    if display is not None:
        return NotebookBar(display)
    if sys.stderr.isatty():
        return TerminalLine(sys.stderr)
    return LogLines(sys.stderr)


def resolve_progress(progress) -> Progress | None:
    """``simulate``'s ``progress`` argument as a callback: None or False (none), True (:func:`progress_display`), or
    a callable ``progress(done_s, total_s)``; ``ValueError`` for anything else."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return progress_display()
    if callable(progress):
        return progress
    raise ValueError(f"progress is True, False, None or a function progress(done_s, total_s), got {progress!r}")
