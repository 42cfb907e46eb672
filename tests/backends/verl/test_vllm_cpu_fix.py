"""The version guard of the CPU weight-sync fix (rollcli.backends.verl.vllm_cpu_fix): it refuses,
loudly and by name, a vLLM it was not checked on or whose CPU GEMM dispatch moved, instead of a
stale engine or a hung sync. With vLLM's CPU build installed, the real module passes the guard
and its linear layers keep their weights."""

from __future__ import annotations

import importlib.util
from types import ModuleType, SimpleNamespace

import pytest

from rollcli.backends.verl.vllm_cpu_fix import (
    TARGET,
    TESTED_VLLM,
    VllmInternalsChanged,
    check_call_sites,
    check_vllm_internals,
)

needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="needs vLLM's CPU build (vllm-cpu)"
)


def _utils(function) -> ModuleType:
    module = ModuleType(TARGET)
    if function is not None:
        module.dispatch_cpu_unquantized_gemm = function
    return module


def test_guard_accepts_the_tested_shape():
    check_vllm_internals(_utils(lambda layer, remove_weight: None), TESTED_VLLM[0])


@pytest.mark.parametrize(
    ("function", "version", "match"),
    [
        (lambda layer, remove_weight: None, "0.32.0", "checked on vLLM"),
        (None, TESTED_VLLM[0], "gone or changed"),
        (lambda layer, remove_weight, pack: None, TESTED_VLLM[0], "gone or changed"),
    ],
)
def test_guard_refuses_other_internals(function, version, match):
    with pytest.raises(VllmInternalsChanged, match=match):
        check_vllm_internals(_utils(function), version)


LAZY = f"""
class UnquantizedLinearMethod:
    def process_weights_after_loading(self, layer):
        if current_platform.is_cpu():
            from {TARGET} import dispatch_cpu_unquantized_gemm

            dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
"""


def test_call_sites_must_look_the_function_up_when_called():
    check_call_sites({"linear": LAZY})
    eager = f"from {TARGET} import dispatch_cpu_unquantized_gemm, other\n" + LAZY
    with pytest.raises(VllmInternalsChanged, match="linear no longer imports"):
        check_call_sites({"linear": eager})
    with pytest.raises(VllmInternalsChanged, match="embedding no longer imports"):
        check_call_sites({"linear": LAZY, "embedding": "def f():\n    return 1\n"})


@needs_vllm
@pytest.mark.vllm
def test_installed_vllm_passes_the_guard_and_keeps_weights():
    """The hook patches vLLM's real dispatch; a linear layer then computes on its live weight:
    a weight loaded in place after the dispatch is the one used."""
    import torch

    from rollcli.backends.verl import vllm_cpu_fix

    vllm_cpu_fix.install_import_hook()
    import vllm.model_executor.layers.utils as utils

    assert utils.dispatch_cpu_unquantized_gemm is vllm_cpu_fix.keep_linear_weights
    layer = SimpleNamespace(weight=torch.nn.Parameter(torch.randn(4, 3), requires_grad=False))
    utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    assert layer.weight.shape == (4, 3)  # kept
    x = torch.randn(2, 3)
    layer.weight.data.copy_(torch.randn(4, 3))  # what a weight sync does
    assert torch.allclose(layer.cpu_linear(x, layer.weight, None), x @ layer.weight.T)
