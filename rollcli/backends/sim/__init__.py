"""The ``sim`` backend: an analytic latent-ability policy trained by the real GRPO estimator.

``create_sim_backend`` is the factory registered in :mod:`rollcli.backends`; the implementation
module is imported on first use so that ``rollcli.backends.sim.config`` stays cheap to import.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.backends.sim.config import SimConfig

if TYPE_CHECKING:
    from rollcli.backends.sim.backend import SimBackend

__all__ = ["SimConfig", "create_sim_backend"]


def create_sim_backend(
    config: Mapping[str, Any] | SimConfig, *, seed: int, job_dir: Path | None = None
) -> SimBackend:
    """Create a sim backend from its spec section (``{kind: sim, <knobs>}``) or a ``SimConfig``."""
    from rollcli.backends.sim.backend import SimBackend, sim_config_from_mapping

    if not isinstance(config, SimConfig):
        config = sim_config_from_mapping(config)
    return SimBackend(config, seed=seed)
