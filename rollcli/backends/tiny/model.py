"""A small decoder-only transformer (GPT) with KV-cache sampling and per-token log-probabilities.

Plain PyTorch: learned token and position embeddings, pre-LayerNorm blocks of causal
multi-head attention and a GELU MLP, a tied output head that can never emit the padding token. :func:`sample` generates many
responses at once: prompts are bucketed by length (so no left padding and no position
shifting), each bucket is prefilled in one pass, then decoded one token per step from the
KV cache, at a temperature or greedily, with a caller-owned ``torch.Generator``.
:func:`response_logprobs` scores given responses in one right-padded forward pass (what the
GRPO update differentiates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rollcli.backends.tiny.tasks import EOS, PAD

__all__ = ["TinyGPT", "sample", "response_logprobs", "response_logprobs_entropy", "pad_batch"]

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


class _Block(nn.Module):
    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        batch, length, width = x.shape
        heads = self.num_heads
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=-1)
        q = q.view(batch, length, heads, -1).transpose(1, 2)
        k = k.view(batch, length, heads, -1).transpose(1, 2)
        v = v.view(batch, length, heads, -1).transpose(1, 2)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        past = k.shape[2] - length
        if past == 0:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif length == 1:
            att = F.scaled_dot_product_attention(q, k, v)
        else:  # several new tokens after a cache: new token i sees past + i + 1 keys
            mask = torch.ones(length, past + length, dtype=torch.bool).tril(diagonal=past)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        att = att.transpose(1, 2).reshape(batch, length, width)
        x = x + self.proj(att)
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class TinyGPT(nn.Module):
    """Decoder-only transformer over the task vocabulary."""

    def __init__(
        self, vocab_size: int, d_model: int, num_layers: int, num_heads: int, max_len: int
    ) -> None:
        super().__init__()
        self.max_len = max_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(_Block(d_model, num_heads) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied
        # PAD only fills stored sequences: the model can never produce it (a large negative
        # logit rather than -inf keeps masked cross-entropy on padded positions finite)
        never = torch.zeros(vocab_size)
        never[PAD] = -1e9
        self.register_buffer("logit_bias", never, persistent=False)
        self.apply(self._init)
        for block in self.blocks:  # GPT-2 scaled init of residual projections
            nn.init.normal_(block.proj.weight, std=0.02 / math.sqrt(2 * num_layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def forward(
        self, tokens: torch.Tensor, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, KVCache]:
        """Logits for every position of ``tokens`` [B, T], continuing after ``cache`` if given."""
        past = 0 if cache is None else cache[0][0].shape[2]
        length = tokens.shape[1]
        if past + length > self.max_len:
            raise ValueError(f"sequence of {past + length} tokens exceeds max_len={self.max_len}")
        positions = torch.arange(past, past + length)
        x = self.tok(tokens) + self.pos(positions)
        new_cache: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[i])
            new_cache.append(kv)
        return self.head(self.ln_f(x)) + self.logit_bias, new_cache


@torch.no_grad()
def sample(
    model: TinyGPT,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator,
    greedy: bool = False,
) -> list[tuple[int, ...]]:
    """One response per prompt (repeat a prompt to get several), each ending at its first EOS.

    A response that reaches ``max_new_tokens`` without EOS is returned as is (it grades wrong).
    Buckets are processed in increasing prompt length and, within a bucket, in the given order,
    so the same prompts, weights and generator state give the same responses.
    """
    was_training = model.training
    model.eval()
    out: list[tuple[int, ...]] = [()] * len(prompts)
    buckets: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        buckets.setdefault(len(p), []).append(i)
    for length in sorted(buckets):
        index = buckets[length]
        tokens = torch.tensor([list(prompts[i]) for i in index], dtype=torch.long)
        logits, cache = model(tokens)
        last = logits[:, -1, :]
        generated = torch.full((len(index), max_new_tokens), PAD, dtype=torch.long)
        done = torch.zeros(len(index), dtype=torch.bool)
        for t in range(max_new_tokens):
            if greedy:
                nxt = last.argmax(dim=-1)
            else:
                probs = torch.softmax(last / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
            generated[:, t] = nxt
            done |= nxt == EOS
            if bool(done.all()) or t == max_new_tokens - 1:
                break
            logits, cache = model(nxt.unsqueeze(1), cache)
            last = logits[:, -1, :]
        for row, i in enumerate(index):
            seq = generated[row].tolist()
            end = seq.index(EOS) + 1 if EOS in seq else len(seq)
            out[i] = tuple(seq[:end])
    model.train(was_training)
    return out


def pad_batch(
    prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``prompt + response`` inputs, next-token targets and a response-token mask.

    ``inputs[b, t]`` predicts ``targets[b, t]``; ``mask[b, t]`` is 1 where that target is a
    response token. Right padding never changes earlier positions under causal attention.
    """
    seqs = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
    width = max(len(s) for s in seqs) - 1
    inputs = torch.full((len(seqs), width), PAD, dtype=torch.long)
    targets = torch.full((len(seqs), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.float32)
    for b, (seq, prompt) in enumerate(zip(seqs, prompts, strict=True)):
        n = len(seq) - 1
        inputs[b, :n] = torch.tensor(seq[:-1])
        targets[b, :n] = torch.tensor(seq[1:])
        mask[b, len(prompt) - 1 : n] = 1.0
    return inputs, targets, mask


def response_logprobs_entropy(
    model: TinyGPT, inputs: torch.Tensor, targets: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`response_logprobs` and the entropy of ``softmax(logits / temperature)`` at every
    position (over the vocabulary), from one forward pass."""
    logits, _ = model(inputs)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1), entropy


def response_logprobs(
    model: TinyGPT, inputs: torch.Tensor, targets: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Per-position log-probability of ``targets`` under ``softmax(logits / temperature)``."""
    logits, _ = model(inputs)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
