"""The GPU stack: one set of pins (verl 0.9.1's), the same in pyproject and the docs, and it
resolves against PyPI for a GPU node without a GPU (the CI check that catches a drift on CPU)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from rollcli.backends.verl import gpu_stack
from rollcli.errors import RollcliError

ROOT = Path(__file__).resolve().parents[3]
INDEX = "https://pypi.org/simple"
# a GPU node: CPython 3.12, x86-64, glibc 2.34 (RHEL/Rocky 9; Ubuntu 22.04 has 2.35); uv takes
# manylinux_2_17 ... manylinux_2_34 wheels for it. vLLM 0.24.0's llguidance>=1.7 has
# manylinux_2_31 wheels only: on glibc 2.28 (RHEL 8) it builds from source (Rust)
PYTHON = "3.12"
PLATFORM = "x86_64-manylinux_2_34"
# pure-Python requirements PyPI ships as source only: the one exception to "wheels only" (hydra-core
# and omegaconf pin antlr 4.9.*; without it uv falls back to hydra-core 1.4.0rc3, pip to 0.11)
SOURCE_ONLY = ("antlr4-python3-runtime",)


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_gpu_extra_is_the_pins():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert extras["gpu"] == [f"{name}=={v}" for name, v in gpu_stack.WHEEL_PINS.items()]
    assert "verl==0.9.1" in extras["verl"]


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs verl")
def test_pins_are_the_ones_verl_declares():
    """verl 0.9.1's own metadata: its `vllm` extra pins the wheels, its flash-attn extra (part
    of `fsdp`) pins flash-attn."""
    assert metadata.version("verl") == "0.9.1"
    pins: dict[str, dict[str, str]] = {}
    for line in metadata.requires("verl") or []:
        match = re.match(r"([A-Za-z0-9_.-]+)==([^;\s]+)\s*;\s*extra == \"([^\"]+)\"", line)
        if match:
            pins.setdefault(match[3], {})[match[1].lower()] = match[2]
    vllm_extra = pins["vllm"]
    for name, version in gpu_stack.WHEEL_PINS.items():
        assert vllm_extra[name] == version, (name, vllm_extra.get(name), version)
    name, version = gpu_stack.FLASH_ATTN_PIN
    assert pins["flash-attn-cu130torch211"][name] == version


def test_docs_show_the_install_commands():
    text = (ROOT / "docs" / "verl.md").read_text()
    for command in gpu_stack.install_commands():
        assert command in text, command


def test_pin_mismatches_name_what_differs(monkeypatch):
    installed = {"torch": "2.11.0+cu130", "vllm": "0.23.1", "transformers": "5.9.0"}

    def version(name):
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(gpu_stack.metadata, "version", version)
    found = {name: (pin, have) for name, pin, have in gpu_stack.pin_mismatches()}
    assert "torch" not in found and "transformers" not in found  # +cu130: the same release
    assert found["vllm"] == ("0.24.0", "0.23.1")
    assert found["flash-attn"] == ("2.8.3", None)


def test_check_attention_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)
    with pytest.raises(RollcliError, match=re.escape(gpu_stack.install_commands()[1])):
        gpu_stack.check_attention("flash_attention_2")
    gpu_stack.check_attention("sdpa")
    gpu_stack.check_attention("eager")
    assert gpu_stack.attention_implementation("cuda") == "flash_attention_2"
    assert gpu_stack.attention_implementation("cpu") == "eager"
    assert gpu_stack.attention_implementation("cuda", "sdpa") == "sdpa"


def _pypi_answers() -> bool:
    try:
        with urllib.request.urlopen(f"{INDEX}/pip/", timeout=10):
            return True
    except OSError:
        return False


def _pip(*args: str, timeout: float) -> subprocess.CompletedProcess:
    # --isolated: this machine's pip config (local indexes, constraints) must not decide
    return subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _uv_compile(requirements: Path, output: Path, cache: Path) -> subprocess.CompletedProcess:
    """``uv pip compile`` for the GPU node, wheels only but for :data:`SOURCE_ONLY`; neither
    this machine's uv configuration nor its cache decides (``--no-config``, no ``UV_*``
    variables, an empty cache)."""
    from uv import find_uv_bin  # the `test` extra installs uv; a missing one fails, not skips

    no_binary = [arg for name in SOURCE_ONLY for arg in ("--no-binary", name)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    return subprocess.run(
        [
            find_uv_bin(),
            "pip",
            "compile",
            "--no-config",
            "--no-python-downloads",
            "--cache-dir",
            str(cache),
            "--index-url",
            INDEX,
            # builds the source-only requirements' metadata; the target is --python-version
            "--python",
            sys.executable,
            "--python-version",
            PYTHON,
            "--python-platform",
            PLATFORM,
            # a specific --no-binary overrides :all: (uv's semantics, unlike pip's)
            "--only-binary",
            ":all:",
            *no_binary,
            "--no-header",
            "--no-annotate",
            "--output-file",
            str(output),
            str(requirements),
        ],
        capture_output=True,
        text=True,
        timeout=480,
        env=env,
    )


def _pinned(lockfile: str) -> dict[str, str]:
    """``{name: version}`` of a requirements.txt that ``uv pip compile`` wrote."""
    resolved = {}
    for line in lockfile.splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            resolved[match[1].lower().replace("_", "-")] = match[2]
    return resolved


def test_pinned_reads_what_uv_writes():
    text = "# comment\nhydra-core==1.3.8\nAntlr4_Python3_Runtime==4.9.3\n    # via x\n"
    assert _pinned(text) == {"hydra-core": "1.3.8", "antlr4-python3-runtime": "4.9.3"}


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_gpu_stack_resolves_for_a_gpu_node(tmp_path):
    """rollcli's requirements + the verl and gpu extras, resolved by ``uv pip compile`` from
    PyPI for CPython 3.12 on x86-64 Linux (glibc 2.34), wheels only but for antlr (pure Python,
    source only): the pins hold together. flash-attn is not part of it (PyPI has its source
    only; it builds on the node): its pinned release is checked to be on the index. About 50 s
    here from an empty cache, network-bound (pip --dry-run took 5 to 9 minutes)."""
    if not _pypi_answers():
        pytest.skip("pypi.org does not answer: the GPU stack's resolution was not checked")
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    requirements = [*project["dependencies"], *extras["verl"], *extras["gpu"]]
    (tmp_path / "gpu.in").write_text("\n".join(requirements) + "\n")
    result = _uv_compile(tmp_path / "gpu.in", tmp_path / "gpu.txt", tmp_path / "uv-cache")
    assert result.returncode == 0, result.stderr[-3000:]
    resolved = _pinned((tmp_path / "gpu.txt").read_text())
    for name, version in gpu_stack.WHEEL_PINS.items():
        assert resolved[name] == version, (name, resolved.get(name))
    assert resolved["verl"] == "0.9.1"
    hydra = Version(resolved["hydra-core"])
    # neither pip's backtracking to an ancient hydra-core nor uv's fallback to a pre-release
    assert hydra >= Version("1.3.2") and not hydra.is_prerelease, hydra
    name, version = gpu_stack.FLASH_ATTN_PIN
    listed = _pip("index", "versions", name, "--index-url", INDEX, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert version in re.split(r"[\s,]+", listed.stdout), listed.stdout[:500]
    print(
        "resolved:",
        ", ".join(f"{n} {resolved[n]}" for n in sorted(resolved) if n in gpu_stack.GPU_PINS),
        f"({len(resolved)} packages)",
    )
