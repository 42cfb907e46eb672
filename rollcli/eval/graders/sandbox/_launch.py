"""The first process of a sandbox (trusted; run as ``python -I -S -c`` with one JSON argument).

Started by :func:`rollcli.eval.graders.sandbox.isolate.start_isolated` in a new session. Before
anything untrusted exists it joins the sandbox's cgroups (so every later process is counted and
limited), sets ``no_new_privs``, the core-dump and open-file limits, drops to the sandbox uid
when started as root (supplementary groups cleared), and then replaces itself with the command
(``bwrap ...``). Any failure exits 111 with a one-line reason on stderr: no command runs
outside its limits. Standard library only.
"""

import ctypes
import json
import os
import resource
import sys

PR_SET_NO_NEW_PRIVS = 38


def main():
    config = json.loads(sys.argv[1])
    for path in config["procs_files"]:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, value in config.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (value, value))
    uid = config.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.getuid() != uid or os.geteuid() != uid:
            raise PermissionError("could not drop to the sandbox uid")
    os.execv(config["argv"][0], config["argv"])


try:
    main()
except BaseException as error:  # noqa: BLE001 - one line to the parent, nothing else runs
    sys.stderr.write(f"rollcli sandbox launcher: {type(error).__name__}: {error}\n")
    sys.stderr.flush()
    os._exit(111)
