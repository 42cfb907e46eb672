"""The code sandbox: untrusted programs run against test inputs with kernel-enforced limits.

- :mod:`.run` — :func:`run_in_sandbox` (one sandbox per solution, per-test results) and
  :class:`SandboxLimits`;
- :mod:`.pool` — :class:`SandboxPool`, warm sandboxes that each run many solutions (training
  rewards, batch evaluation), with per-test and per-rollout deadlines;
- :mod:`.isolate` — :func:`start_isolated`, the reusable set-up (cgroups, launcher, bubblewrap)
  that a long-lived worker can use for many solutions;
- :mod:`.cgroup`, :mod:`.bwrap` — the two kernel mechanisms; :mod:`._launch` and
  :mod:`._runner` — the trusted programs that run first and inside.

What the sandbox guarantees and what it needs from the machine: docs/eval.md.
"""

from rollcli.eval.graders.sandbox.isolate import (
    IsolatedProcess,
    SandboxUnavailable,
    start_isolated,
)
from rollcli.eval.graders.sandbox.pool import SandboxJob, SandboxPool
from rollcli.eval.graders.sandbox.run import (
    RUNNER_SOURCE,
    SandboxLimits,
    SandboxRun,
    TestOutcome,
    run_in_sandbox,
)

__all__ = [
    "IsolatedProcess",
    "RUNNER_SOURCE",
    "SandboxJob",
    "SandboxLimits",
    "SandboxPool",
    "SandboxRun",
    "SandboxUnavailable",
    "TestOutcome",
    "run_in_sandbox",
    "start_isolated",
]
