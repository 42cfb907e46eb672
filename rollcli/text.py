"""Numbers and words as a person reads them, the same in every table rollcli prints.

One format for counts of rollouts and tokens (:func:`fmt_count`: three significant digits with a
k/M/G suffix, ``9.6k``, ``38.5k``, ``16.4M``), one for plurals (:func:`plural`: ``1 seed``,
``2 seeds``). Machine outputs (JSON, CSV) carry the exact numbers instead. Standard library only.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt_count", "fmt_range", "plural", "first_sentence"]

_UNITS = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def fmt_count(value: Any) -> str:
    """A count for people: ``950``, ``9.6k``, ``38.5k``, ``166k``, ``16.4M``; ``?`` if unknown."""
    if value is None:
        return "?"
    value = float(value)
    if not math.isfinite(value):
        return "inf" if value > 0 else "?"
    for unit, size in _UNITS:
        if abs(value) >= size * 0.9995:  # 999,600 reads 1M, not 1e+03k
            return f"{value / size:.3g}{unit}"
    return f"{value:.0f}"


def fmt_range(low: Any, high: Any) -> str:
    """``[9.6k, 192k]`` (one number when both ends print the same)."""
    lo, hi = fmt_count(low), fmt_count(high)
    return lo if lo == hi else f"[{lo}, {hi}]"


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 seed``, ``2 seeds``, ``0 seeds`` (``words`` for irregular plurals)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def first_sentence(text: str | None, width: int = 72) -> str:
    """The first sentence of a docstring's first paragraph, cut to ``width`` characters."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    for stop in (". ", ".\n"):
        if stop in paragraph:
            paragraph = paragraph.split(stop)[0] + "."
            break
    if len(paragraph) > width:
        paragraph = paragraph[: width - 3].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return paragraph.replace("``", "")
