"""Entry point of one math-grading worker process (started by ``MathGradingPool``).

Run as ``python -m rollcli.eval.graders._math_worker FD``: FD is its end of a socket pair. It
warms math-verify up, says ready, then grades (task_id, gold, response) messages one at a time
with math-verify's own timeouts off; the parent kills it if one answer takes too long.
"""

from __future__ import annotations

import os
import signal
import sys
from multiprocessing.connection import Connection

from rollcli.eval.graders.math import MathResult, grade_fallback, grade_math_verify


def _worker_loop(conn: Connection) -> None:
    """Receive (task_id, gold, response); send (task_id, correct, extracted, method)."""
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
        try:
            result = grade_math_verify(gold, response)
        except Exception:  # noqa: BLE001 - a sympy crash on odd input is a fallback case
            fallback = grade_fallback(gold, response)
            result = MathResult(fallback.correct, fallback.extracted, "error")
        conn.send((task_id, result.correct, result.extracted, result.method))


if __name__ == "__main__":
    _worker_loop(Connection(int(sys.argv[1])))
