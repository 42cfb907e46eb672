"""A tiny Hugging Face chat model built in code, for tests of engines and eval jobs.

A 2-layer Qwen2 with a byte-level BPE tokenizer trained on the fly with ``tokenizers`` (a chat
template included), saved to a folder so engines load it by path exactly as they load a real
checkpoint. Its outputs are random text: tests check the plumbing (batching, padding, token
counts, storage, resume), not accuracy. Needs transformers and tokenizers (imported inside).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "build_tiny_hf_model"]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_hf_model(folder: Path, *, hidden_size: int = 32) -> Path:
    """A 2-layer Qwen2 (2 heads of ``hidden_size / 2``) + trained BPE tokenizer, saved in HF
    format under ``folder``. vLLM's CPU attention needs a head size >= 32: ``hidden_size=64``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    corpus = [
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "The answer is \\boxed{27}. Let x = 3, so 2x + 1 = 7 and \\frac{1}{2} + \\frac{1}{2} = 1.",
        "def solve(): print(sum(map(int, input().split())))",
    ] * 20
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    model = AutoModelForCausalLM.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
