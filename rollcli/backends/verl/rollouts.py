"""The verl backend's rollout store: every generated rollout under an int ref, until freed.

Each generation round (one allocator ask) comes back from verl as one ``DataProto`` of fixed
width (prompts padded to ``max_prompt_length``, responses to ``max_response_length``). The store
keeps rounds whole and maps each ref to ``(round, row)``; :meth:`RolloutStore.select` gathers the
rows of any refs (from several rounds and even earlier steps — Pilot-Commit commits a survivor's
pilot rollouts one round, possibly one step, later) into one batch. :meth:`retain` drops rows no
ref needs any more; :meth:`save`/:meth:`load` put the retained rows into a checkpoint so a resumed
run can still train on them. Runs inside verl's driver (the task runner); imports torch and verl.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rollcli.store.atomic import atomic_write_json, read_json
from rollcli.store.datafile import load_data, save_data

__all__ = ["RolloutStore", "pad_for_training"]


class RolloutStore:
    """Rounds of generated rows; refs are consecutive ints (the counter is part of the state)."""

    def __init__(self) -> None:
        self.next_ref = 0
        self._rounds: dict[int, Any] = {}  # round id -> DataProto
        self._where: dict[int, tuple[int, int]] = {}  # ref -> (round id, row)
        self._next_round = 0

    def __len__(self) -> int:
        return len(self._where)

    def add(self, data: Any) -> list[int]:
        """Store one round; returns the refs of its rows, in order."""
        round_id = self._next_round
        self._next_round += 1
        data.meta_info = {}
        self._rounds[round_id] = data
        refs = list(range(self.next_ref, self.next_ref + len(data)))
        self.next_ref += len(data)
        for row, ref in enumerate(refs):
            self._where[ref] = (round_id, row)
        return refs

    def select(self, refs: Sequence[int]) -> Any:
        """One DataProto with the rows of ``refs`` in the given order."""
        from verl import DataProto

        if not refs:
            raise ValueError("select() needs at least one ref")
        missing = [r for r in refs if r not in self._where]
        if missing:
            raise KeyError(f"rollouts {missing[:5]} are not stored (freed or never generated)")
        parts = []
        start = 0
        refs = list(refs)
        # consecutive refs of the same round are taken in one select_idxs call
        while start < len(refs):
            round_id = self._where[refs[start]][0]
            end = start
            while end < len(refs) and self._where[refs[end]][0] == round_id:
                end += 1
            rows = [self._where[r][1] for r in refs[start:end]]
            parts.append(self._rounds[round_id].select_idxs(np.asarray(rows)))
            start = end
        return parts[0] if len(parts) == 1 else DataProto.concat(parts)

    def retain(self, refs: Iterable[int]) -> None:
        """Free every row whose ref is not in ``refs`` (whole rounds go when no row is kept)."""
        keep = {int(r) for r in refs if int(r) in self._where}
        self._where = {r: self._where[r] for r in keep}
        used = {round_id for round_id, _ in self._where.values()}
        self._rounds = {k: v for k, v in self._rounds.items() if k in used}

    # -- checkpoint ---------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write the retained rows (one compressed file) and the ref counter to ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        refs = sorted(self._where)
        if refs:
            # data only (not DataProto.save_to_disk's pickle): tensors, non-tensor columns, meta
            data = self.select(refs)
            save_data(
                folder,
                "rollout_rows",
                {
                    "batch": {k: data.batch[k] for k in data.batch.keys()},  # noqa: SIM118
                    "non_tensor_batch": dict(data.non_tensor_batch),
                    "meta_info": dict(data.meta_info),
                },
                compressed=True,  # rows are padded to max lengths: mostly zeros
            )
        atomic_write_json(folder / "rollouts.json", {"next_ref": self.next_ref, "refs": refs})

    def load(self, folder: Path) -> None:
        state = read_json(folder / "rollouts.json")
        self.__init__()
        self.next_ref = int(state["next_ref"])
        refs = [int(r) for r in state["refs"]]
        if refs:
            from verl import DataProto

            parts = load_data(folder, "rollout_rows")
            data = DataProto.from_dict(
                tensors=parts["batch"],
                non_tensors=parts["non_tensor_batch"],
                meta_info=parts["meta_info"],
            )
            self._rounds[0] = data
            self._next_round = 1
            self._where = {ref: (0, row) for row, ref in enumerate(refs)}


def pad_for_training(batch: Any, divisor: int) -> tuple[Any, int]:
    """Pad with copies of the first rows whose ``response_mask`` is zero: they add no loss and no
    tokens to token-mean normalisation, only make the batch divisible by ``divisor``."""
    from verl.protocol import pad_dataproto_to_divisor

    padded, pad = pad_dataproto_to_divisor(batch, divisor)
    if pad:
        n = len(padded)
        padded.batch["response_mask"][n - pad :] = 0
        if "token_level_scores" in padded.batch.keys():  # noqa: SIM118 - TensorDict
            padded.batch["token_level_scores"][n - pad :] = 0
        uids = padded.non_tensor_batch["uid"].copy()
        for i in range(n - pad, n):
            uids[i] = f"pad{i}"
        padded.non_tensor_batch["uid"] = uids
    return padded, pad
