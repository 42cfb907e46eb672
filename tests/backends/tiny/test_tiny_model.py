"""The transformer: KV-cache decoding equals full forward passes; sampling and log-probs agree."""

from __future__ import annotations

import torch

from rollcli.backends.tiny.model import TinyGPT, pad_batch, response_logprobs, sample
from rollcli.backends.tiny.tasks import EOS, PAD, VOCAB_SIZE


def _model(seed: int = 0) -> TinyGPT:
    torch.manual_seed(seed)
    model = TinyGPT(VOCAB_SIZE, d_model=32, num_layers=2, num_heads=4, max_len=24)
    # random weights make the test meaningful (the init is nearly uniform)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def test_kv_cache_logits_equal_full_forward() -> None:
    model = _model()
    tokens = torch.randint(0, 12, (5, 14), generator=torch.Generator().manual_seed(1))
    full, _ = model(tokens)
    logits, cache = model(tokens[:, :6])  # prefill
    steps = [logits]
    for t in range(6, 14):  # one token at a time from the cache
        logits, cache = model(tokens[:, t : t + 1], cache)
        steps.append(logits)
    cached = torch.cat(steps, dim=1)
    torch.testing.assert_close(cached, full, rtol=1e-5, atol=1e-5)
    # several new tokens after a cache (the masked branch)
    logits, cache = model(tokens[:, :4])
    more, _ = model(tokens[:, 4:9], cache)
    torch.testing.assert_close(more, full[:, 4:9], rtol=1e-5, atol=1e-5)


def test_greedy_sampling_matches_stepwise_argmax_without_cache() -> None:
    model = _model(2)
    prompts = [tuple(range(1, 9)), tuple(range(2, 10)), (3, 3, 3)]
    out = sample(
        model,
        prompts,
        max_new_tokens=6,
        temperature=1.0,
        generator=torch.Generator().manual_seed(0),
        greedy=True,
    )
    for prompt, response in zip(prompts, out, strict=True):
        seq = list(prompt)
        expected = []
        for _ in range(6):
            logits, _ = model(torch.tensor([seq]))
            nxt = int(logits[0, -1].argmax())
            expected.append(nxt)
            seq.append(nxt)
            if nxt == EOS:
                break
        assert list(response) == expected


def test_sampling_is_reproducible_and_temperature_matters() -> None:
    model = _model(3)
    prompts = [tuple(range(1, 9))] * 64
    a = sample(
        model,
        prompts,
        max_new_tokens=5,
        temperature=1.0,
        generator=torch.Generator().manual_seed(5),
    )
    b = sample(
        model,
        prompts,
        max_new_tokens=5,
        temperature=1.0,
        generator=torch.Generator().manual_seed(5),
    )
    c = sample(
        model,
        prompts,
        max_new_tokens=5,
        temperature=1.0,
        generator=torch.Generator().manual_seed(6),
    )
    assert a == b and a != c
    cold = sample(
        model,
        prompts,
        max_new_tokens=5,
        temperature=1e-4,
        generator=torch.Generator().manual_seed(5),
    )
    assert len(set(cold)) == 1  # near-zero temperature is greedy
    assert all(PAD not in r and 1 <= len(r) <= 5 for r in a)


def test_response_logprobs_score_only_response_tokens() -> None:
    model = _model(4)
    prompts = [(1, 2, 3, 11), (4, 5, 6, 7, 8, 11)]
    responses = [(9, 9, EOS), (1, EOS)]
    inputs, targets, mask = pad_batch(prompts, responses)
    assert mask.sum() == 5
    logp = response_logprobs(model, inputs, targets, temperature=0.7)
    for b, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        seq = torch.tensor([list(p) + list(r)])
        logits, _ = model(seq)
        manual = torch.log_softmax(logits[0, len(p) - 1 : -1] / 0.7, dim=-1)
        manual = manual.gather(-1, torch.tensor(r).unsqueeze(-1)).squeeze(-1)
        got = logp[b][mask[b] > 0]
        torch.testing.assert_close(got, manual, rtol=1e-5, atol=1e-6)
