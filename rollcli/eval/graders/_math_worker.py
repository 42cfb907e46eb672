"""Entry point of one math-grading worker process (started by ``MathGradingPool``).

Run as ``python -m rollcli.eval.graders._math_worker FD``: FD is its end of a socket pair. It
warms math-verify up, says ready, then grades (task_id, gold, response) messages one at a time:
first the string fallback, sent at once as a provisional verdict, then math-verify with its own
timeouts off. The parent kills the worker if the answer takes too long and keeps the provisional
verdict, so the deadline covers the whole grading of an answer, fallback included.
"""

from __future__ import annotations

import os
import signal
import sys
from multiprocessing.connection import Connection

from rollcli.eval.graders.math import (
    MAX_ANSWER_CHARS,
    MathResult,
    grade_fallback,
    grade_math_verify,
)


def _cap(text: str | None) -> str | None:
    return None if text is None else text[:MAX_ANSWER_CHARS]


def _worker_loop(conn: Connection) -> None:
    """Receive (task_id, gold, response); send ("fallback", task_id, correct, extracted), then
    (task_id, correct, extracted, method)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and kills us
    grade_math_verify("\\frac{1}{2}", "so \\boxed{0.5}")  # warm sympy/latex2sympy before work
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, gold, response = message
        fallback = grade_fallback(gold, response)
        conn.send(("fallback", task_id, fallback.correct, _cap(fallback.extracted)))
        try:
            result = grade_math_verify(gold, response)
        except Exception:  # noqa: BLE001 - a sympy crash on odd input is a fallback case
            result = MathResult(fallback.correct, fallback.extracted, "error")
        conn.send((task_id, result.correct, _cap(result.extracted), result.method))


if __name__ == "__main__":
    _worker_loop(Connection(int(sys.argv[1])))
