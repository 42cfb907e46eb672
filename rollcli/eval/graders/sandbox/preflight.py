"""Whether the code sandbox can start on this machine, checked once before a job relies on it.

Without this check a job whose reward is ``code`` (or whose evaluation suite has a code
benchmark) starts anyway on a node where the sandbox cannot be built (a non-root Slurm job
usually has no delegated cgroup): every program is then graded as failed, the rewards are all
zero, ``reward/timeouts`` stays 0, and nothing fails. :func:`sandbox_checks` runs the same four
probes the sandbox itself needs — bubblewrap installed, unprivileged user namespaces enabled,
bubblewrap able to build a sandbox, a memory/process-limited cgroup creatable — and
:func:`require_sandbox` turns the first failure into one line that fails the job before any GPU
work starts. ``ROLLCLI_SANDBOX_ALLOW_WEAK=1`` (the sandbox's own opt-in to rlimits-only
isolation, for trusted code) lets the job run on with a warning. ``rollcli doctor`` prints
every probe, one line each.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.errors import RollcliError

__all__ = [
    "CODE_BENCHMARKS",
    "SandboxCheck",
    "SandboxPreflightError",
    "needs_sandbox",
    "require_sandbox",
    "sandbox_checks",
]

log = logging.getLogger(__name__)

CODE_BENCHMARKS = ("livecodebench", "humaneval")
_PROBE_MEMORY = 64 << 20
_PROBE_PIDS = 8


class SandboxPreflightError(RollcliError):
    """The code sandbox cannot start here; the message is one line with the reason and fix."""


@dataclass(frozen=True)
class SandboxCheck:
    """One probe: its name, whether it passed, what was found, and the fix when it failed."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def needs_sandbox(job: Mapping[str, Any]) -> str | None:
    """What in a job config grades code (``"backend.reward: code"``, ``"eval.suite:
    livecodebench"``: the train job validates on the suite, an eval job evaluates it), or
    None when nothing does."""
    backend = job.get("backend") or {}
    if str(backend.get("reward", "")) == "code":
        return "backend.reward: code"
    suite = (job.get("eval") or {}).get("suite") or ()
    code = [name for name in suite if name in CODE_BENCHMARKS]
    return f"eval.suite: {', '.join(code)}" if code else None


def _userns_check(proc_sys: Path) -> SandboxCheck:
    limits = {
        "user/max_user_namespaces": "0",  # every kernel: no namespaces at all
        "kernel/unprivileged_userns_clone": "0",  # Debian/Ubuntu patch: root only
    }
    for name, blocked in limits.items():
        try:
            value = (proc_sys / name).read_text().strip()
        except OSError:
            continue
        if value == blocked:
            return SandboxCheck(
                "user namespaces",
                False,
                f"{proc_sys / name} is {value}: unprivileged user namespaces are off",
                f"ask the admins to allow them (sysctl {name.replace('/', '.')} > 0)",
            )
    return SandboxCheck("user namespaces", True, "unprivileged user namespaces allowed")


def sandbox_checks(
    *, proc: Path = Path("/proc"), probe_bwrap: bool = True, probe_cgroup: bool = True
) -> list[SandboxCheck]:
    """Every probe, in order: bubblewrap installed, user namespaces, bubblewrap runs, cgroup.

    ``proc`` lets tests point at a fake ``/proc`` (its ``sys/`` sysctls and ``self/`` cgroup
    files). The bubblewrap probe runs one empty sandbox (~20 ms); the cgroup probe creates and
    removes one limited group.
    """
    from rollcli.eval.graders.sandbox.bwrap import INSTALL_HINT, check_bwrap, find_bwrap
    from rollcli.eval.graders.sandbox.cgroup import CgroupUnavailable, create_cgroup

    checks = []
    binary = find_bwrap()
    if binary is None:
        checks.append(SandboxCheck("bubblewrap", False, "bwrap is not installed", INSTALL_HINT))
    else:
        checks.append(SandboxCheck("bubblewrap", True, binary))
    checks.append(_userns_check(proc / "sys"))
    if probe_bwrap and binary is not None:
        uid = None if os.geteuid() != 0 else 1_999_999_999  # root drops to an unused uid
        problem = check_bwrap(uid)
        checks.append(
            SandboxCheck(
                "bubblewrap sandbox",
                problem is None,
                problem or "an empty sandbox starts",
                "" if problem is None else "allow unprivileged user namespaces on the nodes",
            )
        )
    if probe_cgroup:
        try:
            create_cgroup(_PROBE_MEMORY, _PROBE_PIDS, proc=proc).remove()
            checks.append(SandboxCheck("cgroup", True, "a memory/pids-limited cgroup can be made"))
        except CgroupUnavailable as error:
            checks.append(
                SandboxCheck(
                    "cgroup",
                    False,
                    f"no delegated cgroup: {error}",
                    "run as root, or have Slurm delegate cgroups to jobs "
                    "(cgroup.conf: ConstrainRAMSpace=yes with cgroup v2 and systemd "
                    "Delegate=yes), or set ROLLCLI_SANDBOX_ALLOW_WEAK=1 for trusted code",
                )
            )
    return checks


def require_sandbox(
    where: str, *, checks: Iterable[SandboxCheck] | None = None, proc: Path = Path("/proc")
) -> None:
    """Raise :class:`SandboxPreflightError` (one line) when a probe fails; ``where`` names what
    needs the sandbox (e.g. ``"backend.reward: code"``). With ``ROLLCLI_SANDBOX_ALLOW_WEAK=1``
    a failure is logged as a warning instead."""
    from rollcli.eval.graders.sandbox.isolate import weak_allowed

    failed = [c for c in (checks if checks is not None else sandbox_checks(proc=proc)) if not c.ok]
    if not failed:
        return
    first = failed[0]
    line = (
        f"{where} needs the code sandbox, which cannot start on {os.uname().nodename}: "
        f"{first.name}: {first.detail}; fix: {first.fix}"
    )
    if len(failed) > 1:
        line += f" (also failing: {', '.join(c.name for c in failed[1:])}; see rollcli doctor)"
    if weak_allowed(False):
        log.warning("%s; running WEAKLY isolated (ROLLCLI_SANDBOX_ALLOW_WEAK=1)", line)
        return
    raise SandboxPreflightError(line.replace("\n", " "))
