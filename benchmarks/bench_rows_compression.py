"""Size and CPU time of the verl backend's retained-rows file, plain vs deflated.

256 rows shaped like verl's (prompts of 1,024 tokens left-padded, responses of 8,192 right-padded,
real lengths 100-600 and 1,000-6,000), random token ids (the worst case for deflate; real text
compresses a little better), with the columns a generated round carries. Compares ``numpy.savez``,
``numpy.savez_compressed`` (deflate level 6) and rollcli's ``save_data(compressed=True)`` (level 1).

    python benchmarks/bench_rows_compression.py
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

import numpy as np

from rollcli.store.datafile import load_data, save_data

NUM_ROWS, PROMPT, RESPONSE = 256, 1024, 8192


def rows() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    prompt_len = rng.integers(100, 600, NUM_ROWS)
    response_len = rng.integers(1000, 6000, NUM_ROWS)
    prompts = np.zeros((NUM_ROWS, PROMPT), np.int64)
    responses = np.zeros((NUM_ROWS, RESPONSE), np.int64)
    for i in range(NUM_ROWS):
        prompts[i, PROMPT - prompt_len[i] :] = rng.integers(1, 151_000, prompt_len[i])
        responses[i, : response_len[i]] = rng.integers(1, 151_000, response_len[i])
    mask = np.concatenate([prompts > 0, responses > 0], 1).astype(np.int64)
    log_probs = np.where(responses > 0, -rng.random((NUM_ROWS, RESPONSE)), 0)
    return {
        "prompts": prompts,
        "responses": responses,
        "input_ids": np.concatenate([prompts, responses], 1),
        "attention_mask": mask,
        "position_ids": np.cumsum(mask, 1) - 1,
        "response_mask": (responses > 0).astype(np.int64),
        "rm_scores": np.zeros((NUM_ROWS, RESPONSE), np.float32),
        "rollout_log_probs": log_probs.astype(np.float32),
    }


def main() -> None:
    arrays = rows()
    for save in (np.savez, np.savez_compressed):
        buffer = io.BytesIO()
        start = time.process_time()
        save(buffer, **arrays)
        cpu = time.process_time() - start
        size = len(buffer.getvalue()) / 2**20
        print(f"{save.__name__}: {size:.0f} MiB, {cpu:.1f} CPU s for {NUM_ROWS} rows")
    with tempfile.TemporaryDirectory() as folder:
        for compressed in (False, True):
            start = time.process_time()
            save_data(folder, "rows", {"batch": arrays}, compressed=compressed)
            cpu = time.process_time() - start
            size = (Path(folder) / "rows.npz").stat().st_size / 2**20
            print(f"save_data(compressed={compressed}): {size:.0f} MiB, {cpu:.1f} CPU s")
        start = time.process_time()
        back = load_data(folder, "rows")["batch"]
        assert all(np.array_equal(back[k], v) for k, v in arrays.items())
        print(f"load_data (deflated): {time.process_time() - start:.1f} CPU s")


if __name__ == "__main__":
    main()
