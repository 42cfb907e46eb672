"""Math answer grading: math-verify (timeouts off, for use inside a killable worker) and a fast
string-normalising fallback. Both report the answer they extracted.

math-verify's own timeouts use ``signal.alarm``, which only works in the main thread; here they
are switched off (``parsing_timeout=None``, ``timeout_seconds=None``) and the deadline is enforced
by :class:`rollcli.eval.graders.pool.MathGradingPool`, which kills a stuck worker. Never call
:func:`grade_math_verify` on untrusted text outside such a pool: a pathological expression can
keep sympy busy for minutes.

The fallback extracts the last ``\\boxed{}`` (else an ``Answer:`` line, else the last number),
normalises both sides (``\\dfrac`` -> ``\\frac``, ``\\left``/``\\right``, units in ``\\text{}``,
spaces, ``$``, degree signs, thousands separators) and compares strings, then numbers.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from rollcli.eval.benchmarks.math_sets import last_boxed

__all__ = [
    "MathResult",
    "exact_match",
    "extract_answer",
    "normalize_answer",
    "grade_fallback",
    "grade_math_verify",
]

Method = Literal["exact", "math_verify", "fallback", "timeout", "error"]


@dataclass(frozen=True)
class MathResult:
    """A graded answer: verdict, the extracted answer (None when nothing was found), how."""

    correct: bool
    extracted: str | None
    method: Method


# Every pattern here is linear in its input: no two adjacent repeats can match the same text
# (``\s*(?:is)?\s*`` or a leading ``\s*`` under ``re.sub`` backtrack quadratically on long
# runs of spaces: 85 s for one answer). tests/eval/test_math_grading.py times them.
_ANSWER_LINE = re.compile(
    r"(?:final answer|answer)(?:[ \t]+is)?[ \t]*[:：][ \t]*(.+)", re.IGNORECASE
)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_UNITS = re.compile(
    r"(?:degrees?|cm|m|km|inches|inch|feet|ft|units?|dollars?|cents?|hours?|minutes?|"
    r"seconds?|sq\.?[ \t]?units?|meters?|miles?|mph)$"
)
MAX_ANSWER_CHARS = 2000  # an extracted answer longer than this is compared unnormalised


def extract_answer(text: str) -> str | None:
    """Last ``\\boxed{}``; else the text after the last ``Answer:``; else the last number."""
    box = last_boxed(text)
    if box is not None and box.strip():  # an empty box is the instruction echoed back
        return box.strip()
    tail = text[-4000:]  # answers sit at the end; bounds the regex work on huge responses
    lines = [m.group(1).strip() for m in _ANSWER_LINE.finditer(tail)]
    if lines:
        return lines[-1].rstrip(".").strip("$ ")
    numbers = _NUMBER.findall(tail)
    return numbers[-1] if numbers else None


def normalize_answer(answer: str) -> str:
    """A canonical string form of a short LaTeX/plain answer (for the string fallback)."""
    s = answer.strip()
    s = s.replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\ ", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("°", "")
    s = s.replace("\\%", "").replace("%", "").replace("$", "")
    s = _TEXT.sub(r"\1", s).rstrip()
    unit = _UNITS.search(s)
    if unit is not None:
        s = s[: unit.start()].rstrip()
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", s)
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    s = s.replace(" ", "").rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    if s.startswith(("x=", "y=", "k=", "n=")) and "," not in s:
        s = s[2:]
    s = re.sub(r"\((-?\d+(?:\.\d+)?)\)", r"\1", s)  # "(3)/(4)" -> "3/4"
    return s


def _light_normalize(s: str) -> str:
    # only rewrites that cannot change a value: spacing, $, \left/\right, \dfrac, final dot
    s = s.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac")
    s = s.replace("\\tfrac", "\\frac").replace("\\!", "").replace("\\,", "").replace("$", "")
    return "".join(s.split()).rstrip(".")


def exact_match(gold: str, response: str) -> MathResult | None:
    """A correct verdict when the last box equals the gold up to spacing (no sympy needed).

    Most correct answers are literally the gold; checking that first keeps math-verify (and
    its worker round trip) for the rest. None means "not decided here".
    """
    box = last_boxed(response)
    if box is not None and _light_normalize(box) == _light_normalize(gold) and box.strip():
        return MathResult(True, box.strip(), "exact")
    return None


def _as_number(s: str) -> float | None:
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            return float(num) / float(den)
        return float(s)
    except (ValueError, ZeroDivisionError):
        return None


def grade_fallback(gold: str, response: str) -> MathResult:
    """String/number comparison of the normalised extracted answer with the gold."""
    extracted = extract_answer(response)
    if extracted is None:
        return MathResult(False, None, "fallback")
    if max(len(gold), len(extracted)) > MAX_ANSWER_CHARS:
        correct = "".join(gold.split()) == "".join(extracted.split())
        return MathResult(correct, extracted[:MAX_ANSWER_CHARS], "fallback")
    a, b = normalize_answer(gold), normalize_answer(extracted)
    if a == b:
        return MathResult(True, extracted, "fallback")
    x, y = _as_number(a), _as_number(b)
    correct = x is not None and y is not None and abs(x - y) <= 1e-6 * max(1.0, abs(x))
    return MathResult(correct, extracted, "fallback")


def _quiet_math_verify() -> None:
    # math-verify warns on every call that its timeouts are off: that is deliberate here
    logging.getLogger("math_verify").setLevel(logging.ERROR)


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple:
    from math_verify import parse

    parsed = parse(f"${gold}$", parsing_timeout=None)
    if not parsed:
        parsed = parse(gold, parsing_timeout=None)
    if not parsed:
        parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=None)
    return tuple(parsed)


def grade_math_verify(gold: str, response: str) -> MathResult:
    """math-verify on the last box (or the whole text when there is none), timeouts off.

    Gold parses are cached. There is no deadline here: see the module docstring.
    """
    from math_verify import parse, verify

    _quiet_math_verify()
    gold_parsed = list(_parse_gold(gold))
    # the protocol grades the last box only (math-verify alone would merge every box)
    box = last_boxed(response)
    boxed = box is not None and box.strip()
    pred = parse(f"\\boxed{{{box}}}" if boxed else response, parsing_timeout=None)
    extracted = str(pred[-1]) if pred else None
    if not gold_parsed or not pred:
        # nothing math-verify can compare: the string fallback still can (e.g. text answers)
        fallback = grade_fallback(gold, response)
        return MathResult(fallback.correct, extracted or fallback.extracted, "fallback")
    correct = bool(verify(gold_parsed, pred, timeout_seconds=None))
    return MathResult(correct, extracted, "math_verify")
