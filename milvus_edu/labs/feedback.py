"""What every lab's self-checks share: the :class:`Feedback` verdict and the judging of a number.

A check returns a :class:`Feedback` that prints as one friendly paragraph and is truthy only when
the answer is right, so a notebook cell can both show it and ``assert`` it. A lab ships every exercise
as ``answer_N = None``; a check given ``None`` says "⏳ Not answered yet: ..." (a falsy Feedback,
never an exception).
"""

from __future__ import annotations

import datetime
import math
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..narrate import plural

_FLOAT_EXACT = 1 << 53  # floats hold every integer below this, and lose low bits above it
#: No answer of any lab, nor any typical mistake (``physical << 60`` is about 2e30), is near this; an int at least
#: this far from 0 is refused before it is judged, as its digits would not fit in a message (Python will not even
#: print an int of more than 4,300 digits).
TOO_LARGE = 10**100
SHOWN_CHARS = 40  # an answer is echoed in a message up to this many characters
_TIMES = (np.datetime64, np.timedelta64, datetime.date, datetime.time, datetime.timedelta)


@dataclass(frozen=True, repr=False)
class Feedback:
    """The verdict on one answer: ``ok`` when right; ``answered`` is False while the answer is ``None``."""

    ok: bool
    message: str
    answered: bool = True

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        # each mark has its words too: a browser without an emoji font draws the marks as empty boxes
        if not self.answered:
            return "⏳ Not answered yet: " + self.message
        if not self.ok:
            return "❌ Not right yet: " + self.message
        return "✅ " + (self.message if self.message.startswith("Right") else "Right: " + self.message)

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return str(self)


def right(message: str) -> Feedback:
    """A right answer, with why it is right."""
    return Feedback(True, message)


def wrong(message: str) -> Feedback:
    """A wrong answer, with a hint."""
    return Feedback(False, message)


def pending(what: str) -> Feedback:
    """No answer yet: say what to put in place of ``None``."""
    return Feedback(False, f"replace `None` with {what}, then run the cell again.", answered=False)


def shown(answer) -> str:
    """``answer`` as a message echoes it: its ``repr`` on one line, cut to :data:`SHOWN_CHARS` characters; never
    raises (an int too long to print is named by its length)."""
    if type(answer) is int and abs(answer) >= TOO_LARGE:
        return f"a {answer.bit_length() * 30103 // 100000 + 1}-digit int"
    try:
        text = " ".join((str(answer) if isinstance(answer, numbers.Number) else repr(answer)).split())
    except Exception:  # noqa: BLE001 - a student's object may refuse to print itself
        return f"a {type(answer).__name__}"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def is_time(answer) -> bool:
    """A date, time or duration (Python's, numpy's or pandas'): numpy counts a duration as an integer, but it is
    not a number a lab asks for."""
    return isinstance(answer, _TIMES)


def _is_pandas_na(value) -> bool:
    try:
        return value is pd.NA or value is pd.NaT
    except TypeError:  # pragma: no cover
        return False


def judge_integer(answer, what: str, judge: Callable[[int], Feedback], *, timestamp: bool) -> Feedback:
    """Turn ``answer`` into an int and ``judge`` it, or say precisely why it is not one.

    ``timestamp``: the expected value is a hybrid timestamp (about 4.6e17), which a float cannot
    hold exactly.
    """
    if answer is None:
        return pending(what)
    if isinstance(answer, (bool, np.bool_)):
        return wrong(f"`{answer}` is a bool; expected {what}.")
    if is_time(answer) or isinstance(answer, (pd.Timestamp, pd.Timedelta)):
        return wrong(f"`{shown(answer)}` is a date, time or duration, not a number; expected {what}.")
    if _is_pandas_na(answer):
        return wrong("That value is missing (pandas `<NA>`): the row you picked has no `ts`. "
                      f"Expected {what}.")
    if isinstance(answer, numbers.Integral):  # int, numpy integers
        return _judge_int(int(answer), what, judge)
    if isinstance(answer, str):
        text = answer.strip().replace("_", "").replace(",", "")
        if not re.fullmatch(r"[+-]?\d+", text):
            return wrong(f"`{shown(answer)}` is a string, not a number; expected {what}.")
        if len(text.lstrip("+-")) > 100:  # int() refuses more than 4,300 digits, and no answer has 100
            return wrong(f"`{shown(answer)}` is a string of {len(text.lstrip('+-')):,} digits, far beyond any "
                          f"value in this lab; expected {what}, without quotes.")
        verdict = _judge_int(int(text), what, judge)
        if verdict.ok:
            return wrong(f"`{shown(answer)}` is a string. The value is right, but give it as an int, "
                          f"without quotes: `{int(text)}`.")
        return wrong(f"`{shown(answer)}` is a string; give numbers without quotes. The value is not right "
                      f"either: {verdict.message}")
    if isinstance(answer, numbers.Real):  # float, numpy floats, Fraction
        try:
            value = float(answer)
        except OverflowError:  # a Fraction of huge ints
            return wrong(f"`{shown(answer)}` is far beyond any value in this lab; expected {what}.")
        if not math.isfinite(value) or not value.is_integer():
            return wrong(f"`{shown(answer)}` is not a whole number; expected {what}.")
        if not timestamp and abs(value) >= _FLOAT_EXACT:
            return wrong(f"`{shown(answer)}` is a float too large to hold a whole number exactly; expected {what}.")
        if timestamp:
            return wrong(f"`{shown(answer)}` is a float. A hybrid timestamp needs 64-bit integer arithmetic: a "
                          f"float keeps only 53 bits, so the low bits (the logical part) get rounded away. "
                          f"Use `<<`, `+` and `//` on ints (not `/`, `2.0**18` or `float`), or wrap a "
                          f"value taken from a table in `int(...)`.")
        verdict = _judge_int(int(value), what, judge)
        if verdict.ok:
            return wrong(f"`{shown(answer)}` is a float. The value is right, but give it as an int: `{int(value)}`.")
        return wrong(f"`{shown(answer)}` is a float; expected an int. The value is not right either: "
                     f"{verdict.message}")
    if isinstance(answer, (pd.Series, pd.DataFrame)):
        return wrong(f"That is a pandas {type(answer).__name__} ({plural(len(answer), 'row')}), not one value. Pick one "
                      f"value with `.iloc[0]` and wrap it in `int(...)`.")
    return wrong(f"Got a value of type {type(answer).__name__}; expected {what}.")


def _judge_int(value: int, what: str, judge: Callable[[int], Feedback]) -> Feedback:
    if abs(value) >= TOO_LARGE:
        return wrong(f"That is {shown(value)}, far beyond any value in this lab; expected {what}.")
    return judge(value)


#: Every hybrid timestamp of a run is above this (its physical part, ms since 1970, shifted left by 18 bits); a
#: physical part alone, or a count, is far below it.
_HYBRID_FLOOR = 1 << 50


def not_hybrid(value: int, want: int) -> Feedback | None:
    """The hint for an int that cannot be the hybrid timestamp ``want`` stands for, else ``None``: ``want``'s
    physical part in milliseconds (``want >> 18``), or any number far below every hybrid timestamp."""
    if value >= _HYBRID_FLOOR:
        return None
    if value == want >> 18:
        return wrong(f"{value} is the physical part alone (milliseconds since 1970). The hybrid timestamp is "
                     f"`(physical << 18) + logical`: take the int from the `ts` column as it is.")
    return wrong(f"{value} is far below any hybrid timestamp (they are about 4.6e17: the physical part in ms, "
                 "shifted left by 18 bits, plus the logical part); give the int from the `ts` column.")


def name_answer(answer, names) -> tuple[str | None, Feedback | None]:
    """An answer that should be one of ``names`` (an invariant's name, say), normalised for comparing.

    Returns ``(normalised, None)`` — lower case, spaces and underscores as ``-``, quotes stripped — or
    ``(None, feedback)`` when there is no answer yet or it is not a string.
    """
    listed = ", ".join(f"'{n}'" for n in names)
    if answer is None:
        return None, pending(f"a string: one of {listed}")
    if not isinstance(answer, str):
        return None, wrong(f"Got a value of type {type(answer).__name__}; answer with a string, one of {listed}.")
    if answer and not answer.strip():  # echoed as it is, its line breaks would split the message
        return None, wrong(f"That string holds only spaces or line breaks; answer with one of {listed}.")
    if len(answer.strip()) > SHOWN_CHARS or not answer.strip().isprintable():
        return None, wrong(f"`{shown(answer)}` is not a name: answer with one short string on one line, one of "
                           f"{listed}.")
    return re.sub(r"[\s_]+", "-", answer.strip().strip("'\"`").lower()), None
