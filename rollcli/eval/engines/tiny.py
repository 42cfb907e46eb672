"""Adapter for the tiny backend's own sampler (``rollcli.backends.tiny``).

The tiny backend owns its model format and sampling. This adapter imports it lazily and
expects ``rollcli.backends.tiny.sampler.load_sampler(path) -> obj`` where ``obj.generate(prompts,
n=, temperature=, top_p=, max_tokens=, seed=)`` returns ``list[list[(text, num_tokens)]]`` (or
:class:`Sample` objects) and ``obj.tokenizer`` is optional (None: plain prompts, no chat template).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from rollcli.eval.engines.base import BaseEngine, EngineUnavailableError, Sample

__all__ = ["TinyEngine"]

_SAMPLER_MODULE = "rollcli.backends.tiny.sampler"


class TinyEngine(BaseEngine):
    name = "tiny"
    preferred_batch_prompts = 64

    def __init__(self, model: str, *, sampler: Any | None = None) -> None:
        if sampler is None:
            try:
                module = importlib.import_module(_SAMPLER_MODULE)
                load = module.load_sampler
            except (ImportError, AttributeError) as error:
                raise EngineUnavailableError(
                    f"the 'tiny' engine needs {_SAMPLER_MODULE}.load_sampler(path) from the tiny "
                    f"backend, which is not available here ({error})"
                ) from error
            sampler = load(model)
        self.sampler = sampler
        self.tokenizer = getattr(sampler, "tokenizer", None)

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
        raw = self.sampler.generate(
            list(prompts),
            n=n,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
        )
        return [[s if isinstance(s, Sample) else Sample(*s) for s in row] for row in raw]
