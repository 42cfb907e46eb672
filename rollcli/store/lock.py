"""The run lock: only one orchestrating ``rollcli run`` per run folder.

``<run>/.lock`` is held with ``fcntl.flock`` for the lifetime of the orchestrator and names its
holder (pid, host, started, command). The kernel releases the lock when the holder dies, even by
SIGKILL, so a stale lock is taken over without ceremony. On file systems without ``flock`` the
holder's pid is checked instead (same host, still alive). The lock file is written in place,
not by rename: the lock lives on its inode.

Run folders may be shared: the lock file is opened with ``O_NOFOLLOW`` and must be a regular
file (a ``.lock`` planted as a symlink would otherwise be followed and its target truncated),
and :func:`holder_process` names the pid to signal only after checking that the process is
the rollcli that holds this very lock (its command line, its start time as recorded in the
lock, and an open descriptor on the lock's inode) — a crafted ``.lock`` cannot point
``rollcli cancel`` at another process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from rollcli.errors import LockHeldError, StoreError
from rollcli.store.atomic import open_nofollow
from rollcli.store.folders import RunFolder
from rollcli.store.state import now

__all__ = ["RunLock", "holder_process", "lock_holder", "pid_alive"]


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, /proc/<pid>/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_info(path: Path) -> dict[str, Any]:
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except (OSError, StoreError):
        return {}
    try:
        with os.fdopen(fd, "rb") as f:
            info = json.loads(f.read(65536).decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _held_by_live_pid(info: dict[str, Any]) -> bool:
    pid = info.get("pid")
    return bool(pid) and info.get("host") == socket.gethostname() and pid_alive(int(pid))


def _held_message(run_dir: Path, info: dict[str, Any]) -> str:
    who = f"pid {info.get('pid', '?')} on {info.get('host', '?')}"
    since = f" since {info['started']}" if info.get("started") else ""
    command = f" ({info['command']})" if info.get("command") else ""
    return (
        f"{run_dir} is in use by another rollcli run: {who}{since}{command}. Wait for it to "
        f"finish, or stop it with: rollcli cancel {run_dir}"
    )


class RunLock:
    """``with RunLock(run_dir): ...`` — raises :class:`LockHeldError` naming the holder."""

    def __init__(self, run_dir: str | os.PathLike[str], command: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = RunFolder(self.run_dir).lock
        self.command = command or " ".join(sys.argv)
        self._fd: int | None = None
        self.took_over: dict[str, Any] | None = None

    def acquire(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise LockHeldError(_held_message(self.run_dir, _read_info(self.path))) from None
            # no flock here (some network file systems): fall back to the recorded pid
            info = _read_info(self.path)
            if _held_by_live_pid(info) and int(info["pid"]) != os.getpid():
                os.close(fd)
                raise LockHeldError(_held_message(self.run_dir, info)) from None
        previous = _read_info(self.path)
        if previous.get("pid") and previous.get("pid") != os.getpid():
            self.took_over = previous
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": now(),
            "command": self.command,
            "start_ticks": _start_ticks(os.getpid()),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        finally:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The live holder's info (pid, host, started, command), or None if nobody holds the lock."""
    path = RunFolder(run_dir).lock
    if not path.exists() and not path.is_symlink():
        return None
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except (OSError, StoreError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return _read_info(path) or {"pid": None}
            info = _read_info(path)
            return info if _held_by_live_pid(info) else None
        return None
    finally:
        os.close(fd)


def holder_process(run_dir: str | os.PathLike[str]) -> int | None:
    """The pid of the rollcli process holding the run's lock on this host, or None.

    The lock file is data anyone with write access to the run folder can craft: the pid it
    names is trusted only when that process's command line is rollcli's, its start time is the
    one the lock recorded, and it holds the lock file itself open (on Linux; elsewhere the
    pid is trusted as before)."""
    holder = lock_holder(run_dir)
    if not holder or not isinstance(holder.get("pid"), int) or holder["pid"] <= 1:
        return None
    pid = holder["pid"]
    if holder.get("host") != socket.gethostname() or not pid_alive(pid):
        return None
    if not sys.platform.startswith("linux"):
        return pid
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        lock = os.stat(RunFolder(run_dir).lock, follow_symlinks=False)
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    if b"rollcli" not in cmdline or holder.get("start_ticks") != _start_ticks(pid):
        return None
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.stat(f"/proc/{pid}/fd/{fd}")
            if (target.st_dev, target.st_ino) == (lock.st_dev, lock.st_ino):
                return pid
    return None
