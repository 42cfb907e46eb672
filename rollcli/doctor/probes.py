"""What ``rollcli doctor`` asks the machine: commands, imports, versions, files, sockets.

Every probe is a small function of this module so tests can replace it (``monkeypatch``) and
simulate a failure without the hardware; nothing here decides what is wrong (that is
:mod:`rollcli.doctor.checks`). Heavy modules (torch, flash_attn) are imported only by the probes
that need them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

__all__ = [
    "command_output",
    "gpu_pins",
    "import_problem",
    "installed_version",
    "network_interfaces",
    "port_open",
    "torch_cuda",
]

RAY_ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")


def command_output(argv: list[str], timeout_s: float = 10.0) -> str | None:
    """stdout of ``argv``, or None when it is missing, fails or times out."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)  # noqa: S603
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def import_problem(module: str) -> str | None:
    """None when ``module`` imports, else the error's first line (flash-attn built against
    another torch fails here with an undefined symbol, not at install)."""
    try:
        importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - any import failure is the finding
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return None


def _pyproject_requirements() -> list[str] | None:
    """The extras of the pyproject next to the imported package (a source checkout), so the
    pins checked are the checkout's own even when the installed metadata is older."""
    import tomllib

    import rollcli

    path = Path(rollcli.__file__).resolve().parents[1] / "pyproject.toml"
    if not path.is_file():
        return None
    data = tomllib.loads(path.read_text("utf-8"))
    extras = (data.get("project") or {}).get("optional-dependencies") or {}
    return [f'{req}; extra == "{name}"' for name, reqs in extras.items() for req in reqs]


def gpu_pins(extras: tuple[str, ...] = ("verl", "gpu")) -> list[Any]:
    """The requirements of rollcli's ``extras`` (packaging ``Requirement`` objects): from the
    checkout's pyproject.toml when there is one, else from the installed package's metadata."""
    from packaging.requirements import Requirement

    lines = _pyproject_requirements()
    if lines is None:
        lines = importlib.metadata.requires("rollcli") or []
    found: dict[str, Any] = {}
    for line in lines:
        req = Requirement(line)
        if req.marker is None:
            continue
        for extra in extras:
            if req.marker.evaluate({"extra": extra}):
                base = Requirement(str(req).split(";")[0])
                if base.name not in found or str(base.specifier):
                    found[base.name] = base
    return list(found.values())


def torch_cuda() -> dict[str, Any]:
    """torch's CUDA build and the devices it sees (``error`` when torch does not import)."""
    try:
        import torch
    except Exception as error:  # noqa: BLE001
        return {"error": f"{type(error).__name__}: {error}"}
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    info["available"] = bool(torch.cuda.is_available())
    info["devices"] = torch.cuda.device_count() if info["available"] else 0
    info["name"] = torch.cuda.get_device_name(0) if info["devices"] else None
    return info


def network_interfaces() -> list[str]:
    """Names of this node's network interfaces."""
    try:
        return sorted(os.listdir("/sys/class/net"))
    except OSError:
        return [name for _, name in socket.if_nameindex()]


def port_open(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether a TCP connection to ``host:port`` opens."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
