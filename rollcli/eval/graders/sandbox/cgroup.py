"""Per-sandbox control groups: a memory limit that counts everything the kernel charges to the
group (anonymous memory, page cache, tmpfs and /dev/shm files, memfds, kernel memory) and a
process limit, on cgroup v1 (separate ``memory`` and ``pids`` hierarchies) or v2 (one unified
hierarchy).

A sandbox's group is created *under the caller's own group* in each hierarchy, so its limits only
tighten what the caller already has (a Slurm job's memory limit keeps counting the sandbox).
:func:`create_cgroup` raises :class:`CgroupUnavailable`, naming what is missing, where no such
group can be made: no controller mounted, no write access (not root and not delegated), or a v2
group that holds other processes (the kernel then refuses to enable controllers below it).
The processes join the group themselves (the sandbox launcher writes its pid into
:attr:`Cgroup.procs_files` before it drops privileges), so no process ever runs unlimited.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Cgroup", "CgroupUnavailable", "create_cgroup"]

log = logging.getLogger(__name__)

_PREFIX = "rollcli-sandbox-"


class CgroupUnavailable(RuntimeError):
    """No cgroup with a memory and a process limit can be created here (the message says why)."""


@dataclass(frozen=True)
class _Hierarchy:
    version: int  # 1 or 2
    mount: Path
    path: str  # the caller's group inside this hierarchy ("/", "/a/b")

    @property
    def base(self) -> Path:
        return self.mount / self.path.lstrip("/")


def _hierarchies(proc: Path) -> dict[str, _Hierarchy]:
    """Where the memory and pids controllers live for this process (v1 preferred per controller)."""
    mounts: dict[str, tuple[int, Path]] = {}
    unified: Path | None = None
    for line in (proc / "self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            unified = unified or mount_point
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in ("memory", "pids"):
                    mounts.setdefault(option, (1, mount_point))
    paths_v1: dict[str, str] = {}
    path_v2 = None
    for line in (proc / "self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            path_v2 = path
        for name in controllers.split(","):
            paths_v1[name] = path
    found: dict[str, _Hierarchy] = {}
    for name in ("memory", "pids"):
        if name in mounts and name in paths_v1:
            found[name] = _Hierarchy(1, mounts[name][1], paths_v1[name])
    if len(found) < 2 and unified is not None and path_v2 is not None:
        v2 = _Hierarchy(2, unified, path_v2)
        available = _read(unified / "cgroup.controllers").split()
        for name in ("memory", "pids"):
            if name not in found and name in available:
                found[name] = v2
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@dataclass
class Cgroup:
    """One sandbox's groups (one per hierarchy: two on v1, one on v2) and how to tear them down."""

    dirs: dict[str, Path]  # controller -> its group folder
    versions: dict[str, int]
    memory_bytes: int
    max_pids: int
    _removed: bool = field(default=False, repr=False)

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid into to join every group (one per folder)."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in dict.fromkeys(self.dirs.values()):
            for token in _read(folder / "cgroup.procs").split():
                found.add(int(token))
        return found

    def kill(self, *, spare: int | None = None) -> None:
        """SIGKILL every process in the groups but ``spare``, until none is left (a fork bomb
        refills). Sparing the sandbox's outermost process lets it reap what it started: a
        process killed after its parent is reaped only by init, and until then it still counts
        in the pids group, so the group cannot be removed."""
        if spare is None:
            for folder in dict.fromkeys(self.dirs.values()):
                if (folder / "cgroup.kill").exists():
                    with contextlib.suppress(OSError):
                        _write(folder / "cgroup.kill", "1")
        for _ in range(400):
            pids = self.pids() - {spare}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def usage(self) -> dict[str, int]:
        """Peak memory and OOM kills as the kernel counted them (keys present where readable)."""
        folder, report = self.dirs["memory"], {}
        if self.versions["memory"] == 1:
            peak = _read(folder / "memory.max_usage_in_bytes").strip()
            events = _read(folder / "memory.oom_control")
            failures = _read(folder / "memory.failcnt").strip()
            if failures.isdigit():
                report["memory_limit_hits"] = int(failures)
        else:
            peak = _read(folder / "memory.peak").strip()
            events = _read(folder / "memory.events")
        if peak.isdigit():
            report["memory_peak_bytes"] = int(peak)
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                report["oom_kills"] = int(value)
        return report

    def remove(self) -> None:
        """Kill what is left and delete the groups (retried while the kernel reaps)."""
        if self._removed:
            return
        self.kill()
        for folder in dict.fromkeys(self.dirs.values()):
            for _ in range(2000):  # up to ~10 s on a loaded machine
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.005)
            else:
                log.warning("sandbox cgroup %s still busy; left for the kernel to empty", folder)
        self._removed = True


def _enable_v2_controllers(base: Path) -> None:
    """Make ``memory`` and ``pids`` available to children of ``base`` (v2's subtree_control)."""
    wanted = {"memory", "pids"}
    if wanted <= set(_read(base / "cgroup.subtree_control").split()):
        return
    try:
        _write(base / "cgroup.subtree_control", "+memory +pids")
        return
    except OSError as error:
        busy = error
    # "no internal processes": a group with members cannot delegate controllers. When the only
    # member is this process, move it into a leaf of its own and try again.
    members = set(_read(base / "cgroup.procs").split())
    if members != {str(os.getpid())}:
        raise CgroupUnavailable(
            f"cgroup v2: cannot enable memory/pids below {base} ({busy.strerror}); it holds other "
            "processes. Run the grader in a group of its own, e.g. `systemd-run --scope -p "
            "Delegate=yes ...`, or as root"
        ) from busy
    leaf = base / f"{_PREFIX}grader"
    leaf.mkdir(exist_ok=True)
    _write(leaf / "cgroup.procs", str(os.getpid()))
    _write(base / "cgroup.subtree_control", "+memory +pids")


def create_cgroup(
    memory_bytes: int, max_pids: int, *, proc: Path = Path("/proc"), name: str | None = None
) -> Cgroup:
    """Create a sandbox's groups with these limits (swap counted too); raises CgroupUnavailable.

    ``proc`` lets tests point at a fake ``/proc`` whose mountinfo names a fake cgroup tree.
    """
    try:
        hierarchies = _hierarchies(proc)
    except OSError as error:
        raise CgroupUnavailable(f"cannot read {proc}/self/cgroup or mountinfo: {error}") from error
    missing = [c for c in ("memory", "pids") if c not in hierarchies]
    if missing:
        raise CgroupUnavailable(f"no cgroup controller {' or '.join(missing)} is mounted")
    name = name or f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    dirs: dict[str, Path] = {}
    versions = {c: h.version for c, h in hierarchies.items()}
    try:
        for controller, hierarchy in hierarchies.items():
            if hierarchy.version == 2 and controller == "pids" and "memory" in dirs:
                dirs["pids"] = dirs["memory"]
                continue
            if hierarchy.version == 2:
                _enable_v2_controllers(hierarchy.base)
            folder = hierarchy.base / name
            folder.mkdir()
            dirs[controller] = folder
        _set_limits(dirs, versions, memory_bytes, max_pids)
    except CgroupUnavailable:
        Cgroup(dirs, versions, memory_bytes, max_pids).remove()
        raise
    except OSError as error:
        Cgroup(dirs, versions, memory_bytes, max_pids).remove()
        where = error.filename or "the cgroup tree"
        raise CgroupUnavailable(
            f"cannot create a limited cgroup ({error.strerror}: {where}); run as root or in a "
            "delegated cgroup"
        ) from error
    return Cgroup(dirs, versions, memory_bytes, max_pids)


def _set_limits(dirs, versions, memory_bytes: int, max_pids: int) -> None:
    memory, pids = dirs["memory"], dirs["pids"]
    if versions["memory"] == 1:
        _write(memory / "memory.limit_in_bytes", str(memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():  # swap counted: no escape there
            _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
    else:
        _write(memory / "memory.max", str(memory_bytes))
        if (memory / "memory.swap.max").exists():
            _write(memory / "memory.swap.max", "0")
    _write(pids / "pids.max", str(max_pids))
