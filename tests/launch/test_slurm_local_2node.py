"""The two-node test cluster itself (``scripts/slurm-local.sh start|stop --nodes 2``).

Its traffic stays inside its two network namespaces (addresses only on the veth pair, no route
to or from the host's interfaces, the host's /etc/hosts untouched); ``start`` is idempotent and
leaves the one-node cluster alone; ``stop`` removes the namespaces, the pair and the client
wrappers, and ``start`` brings it all back. Skipped, naming why, when the cluster is not
running (tests/launch/test_multinode.py runs jobs on it).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from rollcli.testing.slurm import (
    TwoNodeCluster,
    two_node_cluster,
    two_node_skip_reason,
    use_two_node_cluster,
)

SKIP = two_node_skip_reason()
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(SKIP is not None, reason=str(SKIP)),
]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-local.sh"


@pytest.fixture
def cluster(monkeypatch) -> TwoNodeCluster:
    """The running cluster, its clients on PATH (the script must not be steered by them)."""
    return use_two_node_cluster(monkeypatch)


def script(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout
    )


def test_cluster_stays_inside_its_namespaces_and_start_is_idempotent(cluster):
    host_addr = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    host_route = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    prefix = cluster.addresses[0].rsplit(".", 1)[0] + "."
    assert prefix not in host_addr and prefix not in host_route and "rcli-veth" not in host_addr
    assert "rcnode" not in Path("/etc/hosts").read_text()
    for i in range(len(cluster.namespaces)):  # each node: its loopback and its end of the pair
        links = cluster.on_node(i, "ip", "-o", "link").stdout
        names = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()]
        assert names == ["lo", f"rcli-veth{i + 1}"]
        routes = cluster.on_node(i, "ip", "-4", "route").stdout.strip().splitlines()
        assert len(routes) == 1 and routes[0].startswith(f"{prefix}0/30 dev rcli-veth{i + 1} ")
    start = time.monotonic()
    again = script("start", "--nodes", "2")
    assert again.returncode == 0, again.stderr
    assert "starting" not in again.stderr and "created" not in again.stderr  # nothing restarted
    assert time.monotonic() - start < 15
    # the one-node cluster is untouched: its clients still see only its own node
    plain = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    plain["PATH"] = plain["PATH"].replace(cluster.bin_dir + ":", "")
    one = subprocess.run(
        ["sinfo", "-h", "-o", "%N"], env=plain, capture_output=True, text=True, timeout=10
    )
    assert one.returncode != 0 or "rcnode" not in one.stdout


def test_stop_removes_the_namespaces_and_links_then_start_restores_the_cluster(cluster):
    try:
        stopped = script("stop", "--nodes", "2")
        assert stopped.returncode == 0, stopped.stderr
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not any(ns in listed for ns in cluster.namespaces)
        assert (
            "rcli-veth"
            not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        )
        assert not any(Path("/etc/netns", ns).exists() for ns in cluster.namespaces)
        assert not Path(cluster.bin_dir).exists()
        assert two_node_cluster() is None and "no two-node" in str(two_node_skip_reason())
    finally:
        started = script("start", "--nodes", "2")
    assert started.returncode == 0, started.stderr
    assert two_node_cluster() == cluster
