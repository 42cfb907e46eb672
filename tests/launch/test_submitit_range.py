"""Every submitit release in pyproject.toml's range renders the golden sbatch scripts.

rollcli renders sbatch text with submitit's private ``_make_sbatch_string`` (so the script that
``rollcli plan --sbatch`` shows is the one submitted; submitit has no public renderer) and reads
its node lists with ``_parse_node_list``. Instead of an exact pin, pyproject.toml claims a range;
this test downloads each release in it from PyPI (``pip install --no-deps --target``: submitit is
pure Python), and runs the golden sbatch tests (tests/launch/test_sbatch.py) and the node-list
and sacct/squeue parsing tests against it in a subprocess whose ``PYTHONPATH`` puts that release
first. About 15 s a release here. When a new release fails, narrow the range (or update the
goldens deliberately) and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
TESTS = [
    "tests/launch/test_sbatch.py",
    "tests/launch/test_ray_bootstrap.py::test_hostnames_are_one_per_node",
    "tests/launch/test_slurm_fallback.py",
]
# what rollcli imports from submitit (rollcli/launch/*.py), checked in each release
NAMES = (
    "submitit:SlurmExecutor",
    "submitit.helpers:Checkpointable",
    "submitit.helpers:DelayedSubmission",
    "submitit.slurm.slurm:_make_sbatch_string",
    "submitit.slurm.slurm:_parse_node_list",
    "submitit.slurm.slurm:SlurmInfoWatcher",
    "submitit.slurm.slurm:read_job_id",
)


def submitit_requirement() -> Requirement:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "submitit"]
    return req


def test_the_range_is_a_range_with_a_tested_release():
    """Not an exact pin, and the constraints file's tested release lies inside it."""
    spec = submitit_requirement().specifier
    assert not any(s.operator == "==" for s in spec), spec
    lines = (REPO / "constraints" / "ci.txt").read_text().splitlines()
    (tested,) = [line.split("==")[1] for line in lines if line.startswith("submitit==")]
    assert Version(tested) in spec


def _released_in_range() -> list[str]:
    try:
        with urllib.request.urlopen("https://pypi.org/pypi/submitit/json", timeout=15) as answer:
            releases = json.load(answer)["releases"]
    except OSError:
        pytest.skip("pypi.org does not answer: submitit's range was not checked")
    spec = submitit_requirement().specifier
    versions = [
        v
        for v, files in releases.items()
        if files and not Version(v).is_prerelease and Version(v) in spec
    ]
    return sorted(versions, key=Version)


def test_each_release_in_the_range_renders_the_goldens(tmp_path):
    versions = _released_in_range()
    assert versions, f"no submitit release on PyPI matches {submitit_requirement()}"
    env = {k: v for k, v in os.environ.items() if k != "ROLLCLI_UPDATE_GOLDEN"}
    check = "; ".join(f"import {m}; getattr({m}, {n!r})" for m, n in (x.split(":") for x in NAMES))
    failed = {}
    for version in versions:
        target = tmp_path / version
        pip = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check"]
        install = [*pip, "install", "-q", "--no-deps", "--target", str(target)]
        proc = subprocess.run(
            [*install, f"submitit=={version}"], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        env["PYTHONPATH"] = os.pathsep.join([str(target), str(REPO)])
        code = f"import submitit; assert submitit.__version__ == {version!r}; {check}"
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            failed[version] = proc.stderr[-1500:]
            continue
        pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
        proc = subprocess.run(
            pytest_cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            failed[version] = proc.stdout[-1500:]
    print(f"submitit {submitit_requirement().specifier}: checked {', '.join(versions)}")
    assert not failed, failed
