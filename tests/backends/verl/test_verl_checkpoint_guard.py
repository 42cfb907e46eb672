"""The static scan that stands between a verl checkpoint and verl's ``weights_only=False`` load."""

from __future__ import annotations

import os
import pickle

import pytest

from rollcli.backends.verl.checkpoint_guard import (
    UnsafeCheckpointError,
    check_checkpoint_dir,
    pickle_globals,
)


class _Exploit:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (os.system, (f"touch {self.path}",))


def test_plain_state_dicts_pass(tmp_path):
    torch = pytest.importorskip("torch")
    state = {"model": torch.nn.Linear(3, 2).state_dict(), "step": 3, "lr": [1e-6],
             "bf": torch.zeros(2, dtype=torch.bfloat16), "shape": torch.Size([2])}  # fmt: skip
    torch.save(state, tmp_path / "model_world_size_1_rank_0.pt")
    assert check_checkpoint_dir(tmp_path) == 1


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_code_in_a_pickle_is_refused_without_running(tmp_path, protocol):
    torch = pytest.importorskip("torch")
    proof = tmp_path / "pwned"
    torch.save({"ok": torch.ones(1), "x": _Exploit(proof)}, tmp_path / "extra_state.pt")
    (tmp_path / "raw.pt").write_bytes(pickle.dumps(_Exploit(proof), protocol=protocol))
    with pytest.raises(UnsafeCheckpointError, match="(os|posix).system|cannot be checked"):
        check_checkpoint_dir(tmp_path)
    assert not proof.exists()


def test_globals_are_read_through_the_memo():
    data = pickle.dumps([_Exploit("x"), _Exploit("y")], protocol=4)  # second one via BINGET
    assert pickle_globals(data) == {(os.system.__module__, "system")}
    sneaky = b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93."  # STACK_GLOBAL from the memo
    assert pickle_globals(sneaky) == {("os", "system")}
    with pytest.raises(ValueError):
        pickle_globals(b"\x80\x04K\x01K\x02\x93.")  # STACK_GLOBAL of non-literals
