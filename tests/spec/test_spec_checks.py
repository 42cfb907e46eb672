"""Components check their own rules (``rollcli.spec.checks``): the spec asks, and points the
error at the component's knob."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.backends.sim.config import SimConfig
from rollcli.errors import SpecError
from rollcli.spec import load_spec

SPEC = """\
name: checks
backend: {kind: sim, num_train_prompts: 256}
budget: {steps: 3, rollouts_per_step: 64}
allocators:
  grpo: {kind: uniform, n: 8}
"""


def _write(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_a_component_config_check_is_asked_and_points_at_its_knob(tmp_path, monkeypatch):
    seen = []

    def check(self, *, budget, backend):
        seen.append((budget.rollouts_per_step, backend.kind))
        if budget.rollouts_per_step >= self.num_train_prompts:
            raise ValueError(f"num_train_prompts={self.num_train_prompts} is too small a pool")

    monkeypatch.setattr(SimConfig, "check", check, raising=False)
    assert load_spec(_write(tmp_path)).backend.kind == "sim"
    path = _write(tmp_path, SPEC.replace("rollouts_per_step: 64", "rollouts_per_step: 256"))
    with pytest.raises(SpecError, match=r"spec.yaml:2:\d+: backend.num_train_prompts: .*too small"):
        load_spec(path)
    assert seen == [(64, "sim"), (256, "sim")]


def test_backend_capabilities_word_the_errors(tmp_path):
    oracle = SPEC.replace("kind: sim, num_train_prompts: 256", "kind: tiny").replace(
        "grpo: {kind: uniform, n: 8}", "grpo: {kind: uniform, n: 8}\n  o: {kind: oracle_select}"
    )
    with pytest.raises(SpecError, match="only the sim backend knows"):
        load_spec(_write(tmp_path, oracle))
    jobs = SPEC + "eval: {jobs: true}\n"
    with pytest.raises(SpecError, match="eval.jobs: separate eval jobs are for the verl backend"):
        load_spec(_write(tmp_path, jobs))


LCB_SPEC = """\
name: lcb
backend: {kind: verl, model: m, reward: code, train_data: code.jsonl}
budget: {steps: 3, rollouts_per_step: 64}
allocators:
  grpo: {kind: uniform, n: 8}
eval:
  suite: [livecodebench]
"""


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ("", "eval.suite[0]", "set eval.livecodebench.path"),
        ("  livecodebench: {path: lcb, version: v9}\n", "eval.livecodebench.version", "v9"),
    ],
)
def test_livecodebench_needs_its_local_release(tmp_path, extra, field, message):
    with pytest.raises(SpecError) as info:
        load_spec(_write(tmp_path, LCB_SPEC + extra))
    assert f"{field}: " in str(info.value) and message in str(info.value)
    assert info.value.exit_code == 2


def test_livecodebench_release_outside_the_suite_is_refused_and_kept_out_of_dumps(tmp_path):
    text = LCB_SPEC.replace("[livecodebench]", "[math500]") + "  livecodebench: {path: lcb}\n"
    with pytest.raises(SpecError, match="eval.livecodebench: is set but livecodebench is not"):
        load_spec(_write(tmp_path, text))
    spec = load_spec(_write(tmp_path, LCB_SPEC + "  livecodebench: {path: /data/lcb}\n"))
    assert spec.to_dict()["eval"]["livecodebench"] == {"path": "/data/lcb", "version": "v6"}
    plain = load_spec(_write(tmp_path, LCB_SPEC.replace("[livecodebench]", "[math500]")))
    assert "livecodebench" not in plain.to_dict()["eval"]  # job ids of other specs unchanged
