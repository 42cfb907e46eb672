"""Regressions from an end-to-end user review of `rollcli validate`: unreadable files, typos that
also leave a required field missing, and wording of list and top-level errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.errors import SpecError
from rollcli.spec import load_spec

SPEC = """\
name: review
backend: {kind: sim, num_train_prompts: 256}
budget:
  rollouts_per_step: 64
  steps: 3
allocators:
  grpo: {kind: uniform, n: 8}
"""


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_binary_spec_is_a_one_line_spec_error(tmp_path, cli):
    spec = tmp_path / "model.bin"
    spec.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)))
    with pytest.raises(SpecError, match=r"model\.bin: cannot read the spec: not UTF-8 text"):
        load_spec(spec)
    runs = tmp_path / "runs"
    for command in (["validate", spec], ["run", spec, "--runs-dir", runs]):
        result = cli(command)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"error: {spec}: cannot read the spec: not UTF-8"), result
        assert "Traceback" not in result.output and result.stderr.count("\n") == 1
    assert not runs.exists()


def test_binary_base_spec_is_a_spec_error(tmp_path):
    (tmp_path / "base.yaml").write_bytes(b"name: \xff\xfe\x00")
    spec = _write(tmp_path, "extends: ./base.yaml\n" + SPEC)
    with pytest.raises(SpecError, match=r"base\.yaml: cannot read the spec: not UTF-8 text"):
        load_spec(spec)


@pytest.mark.parametrize(
    "budget",
    [
        "budget:\n  rollouts_per_step: 64\n  step: 3\n",  # the typo after the other key
        "budget:\n  step: 3\n  rollouts_per_step: 64\n",  # the typo first (same mark as budget)
        "budget: {rollouts_per_step: 64, step: 3}\n",
    ],
)
def test_misspelt_required_key_is_reported_as_the_typo(tmp_path, budget):
    text = SPEC.replace("budget:\n  rollouts_per_step: 64\n  steps: 3\n", budget)
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, text))
    message = str(caught.value)
    assert ": budget.step: unknown key 'step' in budget; did you mean 'steps'?" in message, message


def test_missing_field_alone_is_still_reported(tmp_path):
    text = SPEC.replace("  steps: 3\n", "")
    with pytest.raises(SpecError, match=r"budget\.steps: missing required field 'steps'"):
        load_spec(_write(tmp_path, text))


def test_unknown_top_level_key_wording(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, SPEC.replace("name:", "nmae:")))
    message = str(caught.value)
    assert "nmae: unknown key 'nmae' at the top level; did you mean 'name'?" in message
    assert "<spec>" not in message


@pytest.mark.parametrize("override", ["seeds=0", "eval.suite=math500"])
def test_scalar_for_a_list_says_list(tmp_path, override):
    with pytest.raises(SpecError) as caught:
        load_spec(_write(tmp_path, SPEC), [override])
    assert ": expected a list, found " in str(caught.value)
    assert "tuple" not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "where", "char"),
    [(b"\x00" * 64, "1:1", "#x0000"), (b"name: x\nbackend: a\x01b\n", "2:11", "#x0001")],
)
def test_control_characters_are_a_spec_error(tmp_path, cli, data, where, char):
    spec = tmp_path / "odd.yaml"
    spec.write_bytes(data)
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert str(caught.value).startswith(f"{spec}:{where}: cannot read the spec: character {char}")
    result = cli(["validate", spec])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "Traceback" not in result.output
