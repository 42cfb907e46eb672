"""Generation engines for evaluation: vLLM (GPU), Hugging Face transformers, the tiny sampler.

Only the protocol and registry are imported here; each engine module is imported on demand by
:func:`create_engine` (so vllm/transformers/torch load only when that engine is used).
"""

from rollcli.eval.engines.base import (
    ENGINES,
    BaseEngine,
    EngineUnavailableError,
    Sample,
    create_engine,
)

__all__ = ["ENGINES", "BaseEngine", "EngineUnavailableError", "Sample", "create_engine"]
