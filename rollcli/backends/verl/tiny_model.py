"""A tiny randomly initialised Qwen2 model and a tokenizer trained on the fly (``model: tiny``).

For the CPU path (tests, CI, the benchmark): no hub access, a few seconds to build. The tokenizer
is a byte-level BPE trained on the given texts with Qwen's chat special tokens, so verl's chat
template handling works: ``<|im_end|>`` ends a turn (and is the eos), ``<|endoftext|>`` pads, and
the newline is a single token (verl's continuous-token builder needs both).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["build_tiny_model", "CHAT_TEMPLATE"]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_model(
    out_dir: str | Path,
    texts: Iterable[str],
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    seed: int = 0,
) -> Path:
    """Train a tokenizer on ``texts``, build a Qwen2 model, save both to ``out_dir`` (idempotent).

    The head dimension is ``hidden_size / num_heads`` (16 by default; vLLM's CPU attention
    needs >= 32, so its path asks for 2 heads)."""
    out = Path(out_dir)
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(list(texts) + ["\n", "\\boxed{0}"], trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    if len(tokenizer.encode("\n", add_special_tokens=False)) != 1:
        raise RuntimeError("the tiny tokenizer must encode a newline as one token")

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    # a half-written folder must not look complete: write to a sibling, then rename
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    for item in tmp.iterdir():
        item.replace(out / item.name)
    tmp.rmdir()
    return out
