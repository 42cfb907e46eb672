"""The bubblewrap command line of a sandbox, and whether bubblewrap works on this machine.

bubblewrap (Debian's ``bubblewrap``, the ``bwrap`` binary Flatpak uses) builds the sandbox's
world from nothing: a new user, mount, pid, network, IPC, UTS and cgroup namespace, a root
filesystem that holds only what is bound in read-only (``/usr`` and the interpreter's prefix;
``/usr/local`` is hidden unless the interpreter lives there), a fresh ``/proc`` of its own pid
namespace, a minimal ``/dev``, and size-capped tmpfs mounts for the work directory (``/tmp``,
also the home and current directory) and ``/dev/shm``; ``/var/tmp`` and ``/run/lock`` point into
``/tmp``. Everything else — project data, benchmark files, home directories, ``/etc``, this
package's own files — does not exist inside. The root, ``/dev`` and the hidden folders are
remounted read-only; nested user namespaces are refused (``--disable-userns``); the sandbox
dies with its parent. The command itself is the pid namespace's init (``--as-pid-1``): no
bubblewrap process that a solution could trace is left inside. Nothing the sandbox writes reaches the host's disk.

:func:`bwrap_argv` is a pure function (tested against a golden file); :func:`check_bwrap` runs
it once on ``/bin/true``-like work and caches why it fails, if it does.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["bwrap_argv", "find_bwrap", "check_bwrap", "sandbox_python", "BwrapUnavailable"]

INSTALL_HINT = (
    "install it (Debian/Ubuntu: apt-get install bubblewrap; RHEL: dnf install bubblewrap)"
)


class BwrapUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here (the message says which)."""


def find_bwrap() -> str | None:
    """The ``bwrap`` binary (``ROLLCLI_BWRAP`` overrides the search), or None."""
    override = os.environ.get("ROLLCLI_BWRAP")
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


def _world_usable(path: str) -> bool:
    """Every folder above ``path`` traversable and the file readable+executable by any user."""
    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode
        if not (stat.S_ISREG(mode) and mode & stat.S_IROTH and mode & stat.S_IXOTH):
            return False
        parent = os.path.dirname(real)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def sandbox_python(*, for_other_uid: bool) -> str:
    """The interpreter that runs inside: ``ROLLCLI_SANDBOX_PYTHON``, else this interpreter's
    base executable, else the system ``python3``. The sandbox's (other) uid must be able to read
    it: the venv's base interpreter here lives under ``/root`` (mode 700), so root callers fall
    back to ``/usr/bin/python3``. The runner and the solutions need only the standard library."""
    override = os.environ.get("ROLLCLI_SANDBOX_PYTHON")
    if override:
        return os.path.realpath(override)
    candidates = [getattr(sys, "_base_executable", sys.executable), sys.executable]
    candidates += ["/usr/bin/python3", "/usr/local/bin/python3"]
    for candidate in candidates:
        usable = candidate and os.path.exists(candidate)
        if usable and (not for_other_uid or _world_usable(candidate)):
            return os.path.realpath(candidate)
    raise BwrapUnavailable(
        "no Python interpreter readable by an unprivileged uid (set ROLLCLI_SANDBOX_PYTHON)"
    )


def _prefix(python: str) -> str:
    """The install prefix of an interpreter at ``<prefix>/bin/pythonX.Y``."""
    return os.path.dirname(os.path.dirname(python))


def bwrap_argv(
    bwrap: str,
    command: Sequence[str],
    *,
    python: str,
    tmpfs_bytes: int,
    shm_bytes: int,
    env: dict[str, str],
) -> list[str]:
    """The full ``bwrap ... -- command`` argv (pure: the same inputs give the same list)."""
    prefix = _prefix(python)
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    # --as-pid-1: the command (our non-dumpable runner) is the pid namespace's init, not bwrap's
    # own reaper, which runs as the sandbox's uid, is dumpable and holds the result pipe: a
    # solution could ptrace it and write a forged result row through it (issue 26)
    argv += ["--as-pid-1", "--new-session", "--hostname", "sandbox", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "lib32", "sbin"):
        target = f"/{name}"
        if os.path.islink(target):
            argv += ["--symlink", os.readlink(target), target]
        elif os.path.isdir(target):
            argv += ["--ro-bind", target, target]
    hidden = []
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    elif not (prefix + "/").startswith("/usr/local/") and os.path.isdir("/usr/local"):
        argv += ["--size", "4096", "--perms", "0555", "--tmpfs", "/usr/local"]
        hidden.append("/usr/local")
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(tmpfs_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    argv += ["--size", str(shm_bytes), "--perms", "1777", "--tmpfs", "/dev/shm"]
    argv += ["--symlink", "/tmp", "/var/tmp", "--symlink", "/tmp", "/run/lock"]
    for folder in ["/dev", *hidden, "/"]:
        argv += ["--remount-ro", folder]
    argv += ["--chdir", "/tmp", "--clearenv"]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


@functools.lru_cache(maxsize=4)
def check_bwrap(run_as: int | None) -> str | None:
    """None when bubblewrap can build a sandbox here as uid ``run_as`` (None: ourselves), else
    the reason it cannot (cached per process: one ~20 ms check)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    try:
        python = sandbox_python(for_other_uid=run_as is not None)
    except BwrapUnavailable as error:
        return str(error)
    argv = bwrap_argv(
        bwrap,
        [python, "-I", "-S", "-c", "pass"],
        python=python,
        tmpfs_bytes=1 << 20,
        shm_bytes=1 << 20,
        env={"PATH": "/usr/bin:/bin"},
    )
    ids = {} if run_as is None else {"user": run_as, "group": run_as, "extra_groups": []}
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, cwd="/", **ids)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as error:
        return f"bubblewrap cannot run: {error}"
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return (
            f"bubblewrap cannot build a sandbox here ({message[-1] if message else done.returncode}); "
            "it needs unprivileged user namespaces (kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces > 0, no container seccomp profile blocking them)"
        )
    return None
