"""The sandbox's set-up pieces on their own: cgroup creation on fake v1 and v2 trees (this
machine has v1; clusters usually v2), and the bubblewrap command line."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rollcli.eval.graders.sandbox import cgroup as cgroup_module
from rollcli.eval.graders.sandbox.bwrap import bwrap_argv
from rollcli.eval.graders.sandbox.cgroup import CgroupUnavailable, create_cgroup


def _fake_proc(tmp_path: Path, mountinfo: list[str], cgroup_lines: list[str]) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self/mountinfo").write_text("\n".join(mountinfo) + "\n")
    (proc / "self/cgroup").write_text("\n".join(cgroup_lines) + "\n")
    return proc


def test_v1_groups_nest_under_the_callers_own(tmp_path):
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    (memory / "job/7").mkdir(parents=True)
    pids.mkdir()
    (memory / "job/7/memory.memsw.limit_in_bytes").write_text("")  # swap accounting exists
    proc = _fake_proc(
        tmp_path,
        [
            f"35 31 0:32 / {memory} rw,relatime - cgroup cgroup rw,memory",
            f"39 31 0:36 / {pids} rw,relatime - cgroup cgroup rw,pids",
        ],
        ["8:pids:/", "4:memory:/job/7", "0::/"],
    )
    group = create_cgroup(256 << 20, 20, proc=proc, name="rollcli-sandbox-t")
    assert group.dirs == {
        "memory": memory / "job/7/rollcli-sandbox-t",
        "pids": pids / "rollcli-sandbox-t",
    }
    assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text() == str(256 << 20)
    assert (group.dirs["pids"] / "pids.max").read_text() == "20"
    assert group.procs_files == [str(d / "cgroup.procs") for d in group.dirs.values()]
    assert not (memory / "job/7/memory.memsw.limit_in_bytes").read_text()  # parent untouched


def test_v2_group_with_delegated_controllers(tmp_path):
    root = tmp_path / "unified"
    (root / "job").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "job/cgroup.subtree_control").write_text("memory pids\n")
    proc = _fake_proc(
        tmp_path, [f"41 31 0:38 / {root} rw,relatime - cgroup2 cgroup2 rw"], ["0::/job"]
    )
    group = create_cgroup(1 << 30, 8, proc=proc, name="rollcli-sandbox-t")
    folder = root / "job/rollcli-sandbox-t"
    assert group.dirs == {"memory": folder, "pids": folder}
    assert (folder / "memory.max").read_text() == str(1 << 30)
    assert (folder / "pids.max").read_text() == "8"
    assert group.procs_files == [str(folder / "cgroup.procs")]


def test_v2_group_holding_other_processes_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "unified"
    (root / "job").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory pids\n")
    (root / "job/cgroup.subtree_control").write_text("")
    (root / "job/cgroup.procs").write_text(f"{os.getpid()}\n1234\n")
    proc = _fake_proc(
        tmp_path, [f"41 31 0:38 / {root} rw,relatime - cgroup2 cgroup2 rw"], ["0::/job"]
    )
    real_write = cgroup_module._write

    def kernel_like_write(path, value):
        if path.name == "cgroup.subtree_control":  # "no internal processes"
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        real_write(path, value)

    monkeypatch.setattr(cgroup_module, "_write", kernel_like_write)
    with pytest.raises(CgroupUnavailable, match="holds other processes"):
        create_cgroup(1 << 30, 8, proc=proc)
    assert sorted(p.name for p in (root / "job").iterdir() if p.is_dir()) == []


def test_missing_controllers_are_named(tmp_path):
    proc = _fake_proc(tmp_path, ["22 1 0:20 / /proc rw - proc proc rw"], ["0::/"])
    with pytest.raises(CgroupUnavailable, match="memory or pids"):
        create_cgroup(1 << 30, 8, proc=proc)


def test_bwrap_command_line():
    argv = bwrap_argv(
        "/usr/bin/bwrap",
        ["/usr/bin/python3", "-I", "-S", "-c", "pass"],
        python="/usr/bin/python3",
        tmpfs_bytes=64 << 20,
        shm_bytes=32 << 20,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    text = " ".join(argv)
    assert argv[:5] == [
        "/usr/bin/bwrap",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
    ]
    assert "--as-pid-1" in argv  # no bwrap reaper inside: the runner is pid 1 (issue 26)
    assert "--ro-bind /usr /usr" in text and "--bind " not in text  # nothing writable from the host
    assert f"--size {64 << 20} --perms 1777 --tmpfs /tmp" in text
    assert f"--size {32 << 20} --perms 1777 --tmpfs /dev/shm" in text
    assert "--symlink /tmp /var/tmp" in text and "--symlink /tmp /run/lock" in text
    assert text.index("--remount-ro /dev") < text.index("--remount-ro / ") < text.index(" -- ")
    assert "--clearenv" in argv and argv[argv.index("--chdir") + 1] == "/tmp"
    assert argv[-6:] == ["--", "/usr/bin/python3", "-I", "-S", "-c", "pass"]
    if os.path.isdir("/usr/local"):  # hidden unless the interpreter lives there
        assert "--tmpfs /usr/local" in text
    other = bwrap_argv(
        "/b",
        ["/opt/py/bin/python3"],
        python="/opt/py/bin/python3",
        tmpfs_bytes=1,
        shm_bytes=1,
        env={},
    )
    assert "--ro-bind /opt/py /opt/py" in " ".join(other)
