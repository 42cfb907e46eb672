"""The generation-engine protocol every engine implements, and the engine registry.

``generate(prompts, n=, temperature=, top_p=, max_tokens=, seed=)`` returns, for each prompt,
``n`` :class:`Sample` objects (text and generated-token count). Prompts are finished strings:
the runner renders them through ``engine.tokenizer``'s chat template first. Engines are created
by name with :func:`create_engine`; each lives in its own module, imported only when asked for,
so a missing optional package (vllm, transformers) fails with a message naming the pip extra.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rollcli.errors import RollcliError

__all__ = ["Sample", "BaseEngine", "EngineUnavailableError", "ENGINES", "create_engine"]


@dataclass(frozen=True)
class Sample:
    text: str
    num_tokens: int


class EngineUnavailableError(RollcliError):
    """The engine's package is not installed (the message names the pip extra)."""


class BaseEngine(ABC):
    """A text generator. ``tokenizer`` (may be None) provides the chat template."""

    name: str = "base"
    tokenizer: Any = None
    #: prompts per ``generate`` call the runner should use (a resume checkpoint each call)
    preferred_batch_prompts: int = 8

    @abstractmethod
    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int,
        temperature: float,
        top_p: float,
        max_tokens: int,
        seed: int,
    ) -> list[list[Sample]]:
        """``n`` samples per prompt, in prompt order."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release GPU memory / worker processes."""


ENGINES: dict[str, tuple[str, str]] = {
    "hf": ("rollcli.eval.engines.hf", "HFEngine"),
    "vllm": ("rollcli.eval.engines.vllm_engine", "VLLMEngine"),
    "tiny": ("rollcli.eval.engines.tiny", "TinyEngine"),
}


def require(module: str, extra: str, engine: str) -> Any:
    """Import ``module`` or raise :class:`EngineUnavailableError` naming the pip extra."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise EngineUnavailableError(
            f"the {engine!r} engine needs {module}: pip install 'rollcli[{extra}]' ({error})"
        ) from error


def create_engine(kind: str, model: str, **options: Any) -> BaseEngine:
    """An engine by registry name (``hf``, ``vllm``, ``tiny``) for the model at ``model``."""
    if kind not in ENGINES:
        raise RollcliError(f"unknown engine {kind!r}; valid: {', '.join(ENGINES)}")
    module_name, class_name = ENGINES[kind]
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(model, **options)
