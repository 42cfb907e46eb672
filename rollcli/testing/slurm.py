"""Test support for the real local Slurm clusters (``bash scripts/slurm-local.sh start``).

The one-node cluster answers the plain Slurm clients. The two-node cluster
(``start --nodes 2``: two network namespaces, see scripts/slurm-local-2node.sh) is reached
through its client wrappers: :func:`two_node_cluster` returns what a test needs to point its
clients at it, or None, and :func:`two_node_skip_reason` says why not (the start script leaves
the reason when namespaces are not permitted here).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "cluster_answers",
    "NO_CLUSTER_REASON",
    "TWO_NODE_RUN_DIR",
    "TwoNodeCluster",
    "two_node_cluster",
    "two_node_skip_reason",
    "use_two_node_cluster",
    "wait_for",
]

NO_CLUSTER_REASON = (
    "no Slurm cluster answers `sinfo` (start one: sudo bash scripts/slurm-local.sh start)"
)
TWO_NODE_RUN_DIR = Path("/run/rollcli-slurm-2n")  # N2_RUN_DIR of scripts/slurm-local-2node.sh


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something true (returned) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def cluster_answers() -> bool:
    """Whether ``sinfo`` answers within 5 s (a cluster is up and this host can reach it)."""
    try:
        proc = subprocess.run(["sinfo", "-h"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@dataclass(frozen=True)
class TwoNodeCluster:
    """The running two-node test cluster: its client environment, nodes and namespaces."""

    slurm_conf: str
    bin_dir: str
    hosts: tuple[str, ...]
    addresses: tuple[str, ...]
    namespaces: tuple[str, ...]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with this cluster's clients first."""
        base = dict(os.environ if base is None else base)
        path = base.get("PATH", "")
        return {**base, "SLURM_CONF": self.slurm_conf, "PATH": f"{self.bin_dir}:{path}"}

    def run(self, *cmd: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """A Slurm client command of this cluster (``sinfo``, ``sacct``...), checked."""
        return subprocess.run(
            list(cmd), env=self.env(), capture_output=True, text=True, timeout=timeout, check=True
        )

    def on_node(
        self, index: int, *cmd: str, input: str | None = None, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """``cmd`` inside node ``index``'s network namespace (0: the first node), unchecked."""
        full = ["ip", "netns", "exec", self.namespaces[index], *cmd]
        return subprocess.run(
            full, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )


def _read_env(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def _probe() -> tuple[TwoNodeCluster | None, str | None]:
    env_file = TWO_NODE_RUN_DIR / "env"
    if not env_file.is_file():
        why = TWO_NODE_RUN_DIR / "unavailable"
        if why.is_file():
            return None, f"the two-node Slurm cluster cannot run here: {why.read_text().strip()}"
        return None, (
            "no two-node Slurm cluster (start one: sudo bash scripts/slurm-local.sh start --nodes 2)"
        )
    values = _read_env(env_file)
    cluster = TwoNodeCluster(
        slurm_conf=values["SLURM_CONF"],
        bin_dir=values["ROLLCLI_SLURM2_BIN"],
        hosts=tuple(values["NODES"].split()),
        addresses=tuple(values["ADDRESSES"].split()),
        namespaces=tuple(values["NAMESPACES"].split()),
    )
    try:
        out = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"the two-node Slurm cluster does not answer `sinfo` ({error})"
    states = dict(line.split() for line in out.splitlines() if line.strip())
    bad = {h: states.get(h, "missing") for h in cluster.hosts if states.get(h) not in _USABLE}
    if bad:
        return None, f"the two-node Slurm cluster's nodes are not usable: {bad}"
    return cluster, None


_USABLE = {"idle", "mixed", "allocated", "completing"}


def two_node_cluster() -> TwoNodeCluster | None:
    """The two-node cluster when it runs and both nodes are usable, else None."""
    return _probe()[0]


def two_node_skip_reason() -> str | None:
    """Why the multi-node tests cannot run (None when they can)."""
    return _probe()[1]


def use_two_node_cluster(monkeypatch: Any) -> TwoNodeCluster:
    """For a test: the running two-node cluster, its clients first on PATH and SLURM_CONF set
    through pytest's ``monkeypatch`` (so the jobs the test submits inherit them)."""
    cluster, reason = _probe()
    assert cluster is not None, reason
    remove_test_firewall(cluster)
    env = cluster.env()
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    return cluster


# the nftables table tests/launch/test_multinode.py puts on a node to cut Ray's ports
TEST_FIREWALL = "rollcli_test_firewall"


def remove_test_firewall(cluster: TwoNodeCluster) -> None:
    """Delete the cut-off test's firewall from every node, if a killed run left it there: it
    would make every later two-node Ray cluster fail to form (the head "never answered")."""
    for index in range(len(cluster.namespaces)):
        cluster.on_node(index, "nft", "delete", "table", "inet", TEST_FIREWALL)
