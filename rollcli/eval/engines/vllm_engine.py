"""vLLM engine (the ``gpu`` extra): n samples per prompt in one ``LLM.generate`` call.

The only rollcli module (with its ``vllm*`` siblings) that imports vllm. Options are passed to
``vllm.LLM`` (``tensor_parallel_size``, ``gpu_memory_utilization``, ``max_model_len``, ``dtype``).
Sampling uses ``SamplingParams(n, temperature, top_p, max_tokens, seed)``; the count of a
sample's generated tokens is ``len(output.token_ids)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollcli.eval.engines.base import BaseEngine, Sample, require

__all__ = ["VLLMEngine"]


class VLLMEngine(BaseEngine):
    name = "vllm"
    preferred_batch_prompts = 512

    def __init__(self, model: str, *, seed: int = 0, **llm_options: Any) -> None:
        vllm = require("vllm", "gpu", "vllm")
        self._vllm = vllm
        self.llm = vllm.LLM(model=model, seed=seed, **llm_options)
        self.tokenizer = self.llm.get_tokenizer()

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
        params = self._vllm.SamplingParams(
            n=n,
            temperature=temperature,
            top_p=top_p if temperature > 0 else 1.0,
            max_tokens=max_tokens,
            seed=seed,
        )
        outputs = self.llm.generate(list(prompts), params, use_tqdm=False)
        return [[Sample(c.text, len(c.token_ids)) for c in o.outputs] for o in outputs]

    def close(self) -> None:
        self.llm = None
