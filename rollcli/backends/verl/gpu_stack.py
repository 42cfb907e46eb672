"""The GPU stack rollcli's verl backend runs on: one set of version pins, the attention choice.

The pins are the versions verl 0.9.1 declares for a vLLM + FSDP node (its ``vllm`` extra:
``torch==2.11.0``, ``torchvision==0.26.0``, ``torchaudio==2.11.0``, ``vllm==0.24.0``,
``transformers==5.9.0``; its ``fsdp`` extra: ``flash-attn==2.8.3``, built for CUDA 13.0 and
torch 2.11). :data:`WHEEL_PINS` is what ``pip install "rollcli[verl,gpu]"`` installs (the ``gpu``
extra of pyproject.toml lists exactly these; a test holds them equal) and what the CI check
resolves against PyPI without a GPU; :data:`FLASH_ATTN_PIN` is installed by a second command,
because flash-attn ships only as a source distribution that builds against the torch already
installed (``--no-build-isolation``). The CPU stack (torch 2.13, ``scripts/test.sh``) is separate.

The attention implementation of verl's FSDP actor is chosen here, explicitly: verl's default is
``flash_attention_2``, which fails in every worker's ``init_model`` when flash-attn does not import.
``backend.attention: auto`` is ``flash_attention_2`` on CUDA and ``eager`` on CPU; ``sdpa`` is the
fallback for a node without flash-attn (PyTorch's own kernels: no extra package).

Nothing here imports torch, verl or vllm at module level; ``rollcli doctor`` may call
:func:`pin_mismatches`, :func:`attention_implementation` and :func:`check_attention`.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from rollcli.errors import RollcliError

__all__ = [
    "ATTENTION_CHOICES",
    "FLASH_ATTN_PIN",
    "GPU_PINS",
    "WHEEL_PINS",
    "attention_implementation",
    "check_attention",
    "install_commands",
    "pin_mismatches",
]

# verl 0.9.1's `vllm` extra (torch, torchvision and torchaudio move together)
WHEEL_PINS: dict[str, str] = {
    "torch": "2.11.0",
    "torchvision": "0.26.0",
    "torchaudio": "2.11.0",
    "vllm": "0.24.0",
    "transformers": "5.9.0",
}
# verl 0.9.1's `fsdp` extra (`flash-attn-cu130torch211`); source only on PyPI
FLASH_ATTN_PIN = ("flash-attn", "2.8.3")
GPU_PINS: dict[str, str] = {**WHEEL_PINS, FLASH_ATTN_PIN[0]: FLASH_ATTN_PIN[1]}

ATTENTION_CHOICES = ("auto", "flash_attention_2", "sdpa", "eager")


def install_commands(target: str = ".") -> list[str]:
    """The two commands that install the GPU stack on a GPU node (docs/verl.md shows them)."""
    name, version = FLASH_ATTN_PIN
    return [
        f'pip install -e "{target}[verl,gpu]"',
        f'pip install --no-build-isolation "{name}=={version}"',
    ]


def attention_implementation(device: str, attention: str = "auto") -> str:
    """The attention implementation verl's actor gets: ``auto`` is ``flash_attention_2`` on
    ``cuda`` and ``eager`` on ``cpu``; an explicit choice is checked against the device."""
    if attention not in ATTENTION_CHOICES:
        raise ValueError(
            f"attention must be one of {', '.join(ATTENTION_CHOICES)}, got {attention!r}"
        )
    if attention == "auto":
        return "flash_attention_2" if device == "cuda" else "eager"
    if device == "cpu" and attention == "flash_attention_2":
        raise ValueError("attention 'flash_attention_2' needs device 'cuda'; on cpu use 'eager'")
    return attention


def _flash_attn_problem() -> tuple[bool, str] | None:
    """``(fatal, why)`` when flash-attn cannot be used as pinned here; None when it imports at
    the pinned version. Another version is not fatal: it may still work."""
    name, version = FLASH_ATTN_PIN
    try:
        import flash_attn  # noqa: F401 - the import itself is the check (CUDA/ABI mismatches)
    except Exception as error:  # noqa: BLE001 - ImportError, OSError (undefined symbol), ...
        return True, f"flash-attn does not import ({type(error).__name__}: {error})"
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    if installed.split("+")[0] != version:
        return False, f"flash-attn {installed} is installed, rollcli's pin is {version}"
    return None


def check_attention(implementation: str) -> None:
    """Raise a :class:`RollcliError` naming the install command when ``implementation`` is
    ``flash_attention_2`` and flash-attn does not import (another version only warns)."""
    if implementation != "flash_attention_2":
        return
    problem = _flash_attn_problem()
    if problem is None:
        return
    fatal, why = problem
    if not fatal:
        import warnings

        warnings.warn(f"rollcli: {why}", stacklevel=2)
        return
    raise RollcliError(
        f"backend.attention resolves to flash_attention_2 (verl's FSDP actor on cuda) but "
        f"{why}. Install it on the GPU node: {install_commands()[1]} "
        f"(docs/verl.md, 'Installing on a GPU node'), or set backend.attention: sdpa"
    )


def pin_mismatches() -> list[tuple[str, str, str | None]]:
    """``(package, pinned, installed or None)`` for every GPU pin this environment differs from."""
    out = []
    for name, version in GPU_PINS.items():
        try:
            installed: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        # local version labels (2.11.0+cu130) are the same release
        if installed is None or installed.split("+")[0] != version:
            out.append((name, version, installed))
    return out


def describe() -> dict[str, Any]:
    """The pins and install commands as plain data (for ``rollcli doctor`` and docs)."""
    return {"pins": dict(GPU_PINS), "install": install_commands()}
