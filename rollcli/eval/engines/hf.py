"""Hugging Face transformers engine: batched sampling on CPU or GPU with left padding.

Loads ``AutoModelForCausalLM`` and ``AutoTokenizer`` from a folder (or a GGUF file in it via
``gguf_file=``; a GGUF chat model's end-of-turn token becomes eos and pad, see REFERENCE §8), or wraps objects already in memory (:meth:`HFEngine.from_objects`, used by
tests with models built in code). Each prompt is repeated ``n`` times and sampled in batches of
``batch_size`` rows, padded on the left so every row's generation starts at the same column.
The generated-token count stops at (and includes) the first end-of-sequence token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollcli.errors import RollcliError
from rollcli.eval.engines.base import BaseEngine, Sample, require

__all__ = ["HFEngine"]


class HFEngine(BaseEngine):
    name = "hf"

    def __init__(
        self,
        model: str | None = None,
        *,
        gguf_file: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 16,
        _objects: tuple[Any, Any] | None = None,
    ) -> None:
        torch = require("torch", "hf", "hf")
        transformers = require("transformers", "hf", "hf")
        self.batch_size = batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if _objects is not None:
            self.model, self.tokenizer = _objects
        else:
            if model is None:
                raise ValueError("HFEngine needs a model path")
            torch_dtype = (
                getattr(torch, dtype)
                if dtype
                else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
            )
            kwargs = {"gguf_file": gguf_file} if gguf_file else {}
            try:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(model, **kwargs)
                self.model = transformers.AutoModelForCausalLM.from_pretrained(
                    model, dtype=torch_dtype, **kwargs
                )
            except (OSError, ValueError) as error:
                raise RollcliError(
                    f"cannot load model {model!r} with transformers: {str(error).splitlines()[0]}"
                ) from error
        self.model.to(self.device).eval()
        if gguf_file:
            self._fix_gguf_chat_tokens()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.preferred_batch_prompts = max(1, batch_size)

    def _fix_gguf_chat_tokens(self) -> None:
        # GGUF chat models (SmolLM2) come out with eos = <|im_start|> and no pad: a ChatML
        # turn ends at <|im_end|>, so stop (and pad) there
        vocab = self.tokenizer.get_vocab()
        if "<|im_end|>" in vocab and "<|im_end|>" in (self.tokenizer.chat_template or ""):
            self.tokenizer.eos_token = "<|im_end|>"
            self.tokenizer.pad_token = "<|im_end|>"
            self.model.generation_config.eos_token_id = vocab["<|im_end|>"]
            self.model.generation_config.pad_token_id = vocab["<|im_end|>"]

    @classmethod
    def from_objects(cls, model: Any, tokenizer: Any, **options: Any) -> HFEngine:
        """Wrap an in-memory model and tokenizer (no files)."""
        return cls(None, _objects=(model, tokenizer), **options)

    def _eos_ids(self) -> set[int]:
        ids = set()
        for source in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(source)
        return ids

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
        import torch

        rows = [p for p in prompts for _ in range(n)]
        eos = self._eos_ids()
        samples: list[Sample] = []
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start : start + self.batch_size]
            encoded = self.tokenizer(batch, return_tensors="pt", padding=True).to(self.device)
            torch.manual_seed(seed + start)
            sampling = (
                {"do_sample": True, "temperature": temperature, "top_p": top_p}
                if temperature > 0
                else {"do_sample": False}
            )
            with torch.no_grad():
                out = self.model.generate(
                    **encoded,
                    max_new_tokens=max_tokens,
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=sorted(eos) or None,
                    **sampling,
                )
            generated = out[:, encoded["input_ids"].shape[1] :].tolist()
            for tokens in generated:
                length = len(tokens)
                for i, token in enumerate(tokens):
                    if token in eos:
                        length = i + 1
                        break
                text = self.tokenizer.decode(tokens[:length], skip_special_tokens=True)
                samples.append(Sample(text, length))
        return [samples[i * n : (i + 1) * n] for i in range(len(prompts))]

    def close(self) -> None:
        self.model = None
