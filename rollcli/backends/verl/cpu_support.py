"""Run verl 0.9.1's trainer on CPU: a ``cpu`` platform, a gloo fix and a transformers rollout server.

Loaded in *every* verl process (driver, task runner, workers, rollout server) through
``VERL_USE_EXTERNAL_MODULES=rollcli.backends.verl.cpu_support`` — only when a spec says
``device: cpu`` (tests, CI, the benchmark). Importing it registers:

* a ``cpu`` platform in verl's ``PlatformRegistry`` (device ``cpu``, gloo, Ray resource ``GPU``:
  Ray is started with fake GPUs so verl's placement groups still find one "GPU" per worker);
* a fix for the ``cpu:gloo,cpu:gloo`` backend string verl builds for ``init_process_group``;
* the ``hf`` rollout of :mod:`rollcli.backends.verl.hf_rollout` (transformers in a Ray actor);
* with ``rollout_engine: vllm`` (``VLLM_TARGET_DEVICE=cpu``, :data:`~rollcli.backends.verl.
  cpu_settings.VLLM_CPU_ENVIRONMENT`): the weight-sync fix of
  :mod:`rollcli.backends.verl.vllm_cpu_fix`, applied when vLLM loads (version-guarded).

:mod:`rollcli.backends.verl.cpu_settings` gives the environment and the verl overrides
this path needs (REFERENCE.md §5). Nothing here is used on GPUs.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Any

import torch

from rollcli.backends.verl.cpu_settings import cpu_environment, cpu_overrides

__all__ = ["cpu_environment", "cpu_overrides"]
logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# platform
# ---------------------------------------------------------------------------------------------
class _CpuDeviceModule:
    """What verl calls on ``get_torch_device()``, answered for a CPU (memory figures are 0)."""

    class Stream:  # verl creates streams for overlapping copies; on CPU they are no-ops
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def wait_stream(self, *args: Any) -> None:
            pass

    class Event:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def record(self, *args: Any) -> None:
            pass

        def synchronize(self) -> None:
            pass

    @staticmethod
    @contextmanager
    def stream(*args: Any, **kwargs: Any):
        yield

    @staticmethod
    def current_stream(*args: Any, **kwargs: Any) -> _CpuDeviceModule.Stream:
        return _CpuDeviceModule.Stream()

    is_available = staticmethod(lambda: True)
    current_device = staticmethod(lambda: 0)
    device_count = staticmethod(lambda: 1)
    set_device = staticmethod(lambda *a, **k: None)
    synchronize = staticmethod(lambda *a, **k: None)
    empty_cache = staticmethod(lambda *a, **k: None)
    ipc_collect = staticmethod(lambda *a, **k: None)
    set_per_process_memory_fraction = staticmethod(lambda *a, **k: None)
    manual_seed = staticmethod(lambda seed: torch.manual_seed(seed))
    manual_seed_all = staticmethod(lambda seed: torch.manual_seed(seed))
    get_rng_state = staticmethod(lambda *a, **k: torch.get_rng_state())
    set_rng_state = staticmethod(lambda state, *a, **k: torch.set_rng_state(state))
    memory_allocated = staticmethod(lambda *a, **k: 0)
    memory_reserved = staticmethod(lambda *a, **k: 0)
    max_memory_allocated = staticmethod(lambda *a, **k: 0)
    max_memory_reserved = staticmethod(lambda *a, **k: 0)
    reset_peak_memory_stats = staticmethod(lambda *a, **k: None)
    mem_get_info = staticmethod(lambda *a, **k: (1 << 34, 1 << 34))
    get_device_name = staticmethod(lambda *a, **k: "cpu")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)


def _register_platform() -> None:
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import PlatformRegistry

    device_module = _CpuDeviceModule()

    @PlatformRegistry.register(platform="cpu")
    class PlatformCPU(PlatformBase):
        """verl on CPU: gloo collectives, Ray's (fake) GPU resource for placement."""

        device_name = "cpu"
        vendor_name = "cpu"

        @property
        def device_module(self):  # type: ignore[override]
            return device_module

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            return os.environ.get("VERL_PLATFORM", "") == "cpu"

        def current_device(self) -> str:  # type: ignore[override]
            return "cpu"  # used as ``tensor.to(get_device_id())``: an int would mean an accelerator

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            pass

        def synchronize(self, device_index: int | None = None) -> None:
            pass

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            pass

        def empty_cache(self) -> None:
            pass

        def get_device_capability(self, device_index: int = 0):
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            pass

        def profiler_stop(self) -> None:
            pass

        def ray_resource_name(self) -> str:
            return "GPU"

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None

    # PlatformBase declares these as abstract properties; the class attributes above satisfy them.
    PlatformCPU.__abstractmethods__ = frozenset()


def _patch_init_process_group() -> None:
    """verl asks for ``cpu:gloo,<device>:<backend>``; on CPU that is ``cpu:gloo,cpu:gloo``."""
    import torch.distributed as dist

    original = dist.init_process_group
    if getattr(original, "_rollcli_patched", False):
        return

    def init_process_group(*args: Any, backend: str | None = None, **kwargs: Any):
        if isinstance(backend, str) and "," in backend:
            parts = list(dict.fromkeys(part.strip() for part in backend.split(",")))
            backend = ",".join(parts) if len(parts) > 1 else parts[0]
        if backend == "cpu:gloo":
            backend = "gloo"
        return original(*args, backend=backend, **kwargs)

    init_process_group._rollcli_patched = True  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group


def _install() -> None:
    _patch_init_process_group()
    if os.environ.get("VLLM_TARGET_DEVICE") == "cpu":
        from rollcli.backends.verl.vllm_cpu_fix import install_import_hook

        install_import_hook()
    try:
        _register_platform()
        from rollcli.backends.verl.hf_rollout import register_hf_rollout

        register_hf_rollout()
    except ImportError as error:  # verl absent: this module is only meant to be loaded by verl
        logger.debug("verl not importable, cpu support not registered: %s", error)


_install()
