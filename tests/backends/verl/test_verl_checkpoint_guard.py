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


def _legacy_bytes(torch, state) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer, _use_new_zipfile_serialization=False)
    return buffer.getvalue()


def test_every_pickle_of_a_legacy_file_is_read(tmp_path):
    """torch's legacy format holds five pickles; a malicious second one used to pass."""
    import io

    torch = pytest.importorskip("torch")
    proof = tmp_path / "pwned"
    genuine = _legacy_bytes(torch, {"w": torch.ones(2)})
    stream = io.BytesIO(genuine)
    pickle.load(stream)  # the magic number: the guard read this one only
    rest = stream.read()
    crafted = genuine[: len(genuine) - len(rest)] + pickle.dumps(_Exploit(proof)) + rest
    (tmp_path / "model_world_size_1_rank_0.pt").write_bytes(crafted)
    with pytest.raises(UnsafeCheckpointError, match="pickle 2: names (os|posix).system"):
        check_checkpoint_dir(tmp_path)
    assert not proof.exists()
    (tmp_path / "model_world_size_1_rank_0.pt").write_bytes(genuine)
    assert check_checkpoint_dir(tmp_path) == 1  # a genuine legacy file still passes


def test_a_pickle_with_a_zip_appended_is_refused(tmp_path):
    """torch decides zip-or-not by the first bytes: such a polyglot is unpickled as legacy."""
    import io

    torch = pytest.importorskip("torch")
    proof = tmp_path / "pwned"
    archive = io.BytesIO()
    torch.save({"w": torch.ones(2)}, archive)
    polyglot = pickle.dumps(_Exploit(proof)) + archive.getvalue()
    (tmp_path / "extra_state_world_size_1_rank_0.pt").write_bytes(polyglot)
    with pytest.raises(UnsafeCheckpointError, match="cannot be checked|system"):
        check_checkpoint_dir(tmp_path)
    assert not proof.exists()


def test_every_member_of_a_zip_is_read_duplicates_included(tmp_path):
    import warnings
    import zipfile

    torch = pytest.importorskip("torch")
    path = tmp_path / "optim_world_size_1_rank_0.pt"
    torch.save({"w": torch.ones(2)}, path)
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
    with warnings.catch_warnings(), zipfile.ZipFile(path, "a") as archive:
        warnings.simplefilter("ignore")  # "Duplicate name": exactly the point
        archive.writestr(name, pickle.dumps(_Exploit(tmp_path / "pwned")))
    with zipfile.ZipFile(path) as archive, archive.open(name) as member:
        assert b"system" in member.read()  # the last of the duplicates: a genuine one first
    bad = tmp_path / "bad"
    bad.mkdir()
    with (
        zipfile.ZipFile(path) as source,
        zipfile.ZipFile(bad / "x.pt", "w") as target,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        for info in reversed(source.infolist()):  # the malicious duplicate first
            target.writestr(info, source.open(info).read())
    for folder in (tmp_path, bad):
        with pytest.raises(UnsafeCheckpointError, match="system"):
            check_checkpoint_dir(folder)


def test_the_pre_1_0_tar_format_is_refused(tmp_path):
    import tarfile

    member = tmp_path / "storages"
    member.write_bytes(pickle.dumps(0))
    with tarfile.open(tmp_path / "old.pt", "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(member, arcname="storages")
    member.unlink()
    with pytest.raises(UnsafeCheckpointError, match="tar checkpoint format"):
        check_checkpoint_dir(tmp_path)
