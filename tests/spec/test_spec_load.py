"""Loading specs: composition (extends), overrides, interpolation, presets, defaults, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

from rollcli.errors import SpecError
from rollcli.spec import load_spec, load_spec_data, spec_json_schema
from rollcli.spec.models import BACKEND_CONFIGS, backend_config_classes, spec_model

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """\
name: mini
backend: {kind: sim, num_train_prompts: 256}
budget: {steps: 3, rollouts_per_step: 64}
allocators:
  grpo: {kind: uniform, n: 8}
  pc: {kind: pilot_commit, n_pilot: 4, n_commit: 12}
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_all_backends_are_wired():
    """sim, tiny and verl configs must all be in the spec's backend union."""
    assert set(backend_config_classes()) == set(BACKEND_CONFIGS) == {"sim", "tiny", "verl"}


def test_minimal_spec_defaults_and_frozen(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    assert spec.name == "mini"
    assert spec.seeds == (0,)
    assert spec.target.baseline == "grpo"  # default: the first uniform allocator
    assert spec.launch.executor == "local"
    assert spec.allocators["pc"].p_upper == 0.75  # every knob present after validation
    with pytest.raises(pydantic.ValidationError):
        spec.name = "other"
    data = spec.to_dict()
    assert list(data)[:5] == ["name", "description", "backend", "budget", "allocators"]
    assert data["allocators"]["pc"]["kind"] == "pilot_commit"
    assert spec_model().model_validate(data).to_dict() == data  # the resolved spec round-trips


def test_extends_template_and_relative_base(tmp_path):
    base = write(
        tmp_path, "seeds: [3, 4]\neval: {every: 7}\nallocators: {grpo: {kind: uniform}}\n", "b.yaml"
    )
    child = write(
        tmp_path,
        "extends: [base, ./b.yaml]\nname: child\nbackend: {kind: sim}\n"
        "budget: {steps: 2, rollouts_per_step: 64}\neval: {suite: [math500]}\n",
    )
    spec = load_spec(child)
    assert spec.seeds == (3, 4)  # from b.yaml, which comes after the template
    assert spec.eval.every == 7 and spec.eval.suite == ("math500",)  # mappings merge
    assert spec.checkpoint.every == 1  # from rollcli/templates/specs/base.yaml
    assert base.exists()


def test_extends_kind_change_replaces_the_section(tmp_path):
    write(tmp_path, MINIMAL.replace("name: mini\n", ""), "base.yaml")
    child = write(
        tmp_path, "extends: ./base.yaml\nname: c\nallocators: {pc: {kind: uniform, n: 16}}\n"
    )
    spec = load_spec(child)
    assert spec.allocators["pc"].kind == "uniform"  # not merged with pilot_commit's knobs
    assert spec.allocators["pc"].n == 16


def test_extends_cycle_is_an_error(tmp_path):
    write(tmp_path, "extends: ./b.yaml\nname: a\n", "a.yaml")
    write(tmp_path, "extends: ./a.yaml\n", "b.yaml")
    with pytest.raises(SpecError, match="cycle"):
        load_spec(tmp_path / "a.yaml")


def test_errors_in_a_base_point_into_the_base(tmp_path):
    write(tmp_path, "seeds: [0]\neval: {evry: 5}\n", "base.yaml")
    child = write(tmp_path, "extends: ./base.yaml\n" + MINIMAL)
    with pytest.raises(SpecError) as caught:
        load_spec(child)
    assert str(caught.value).startswith(f"{tmp_path / 'base.yaml'}:2:8: eval.evry: unknown key")
    assert "did you mean 'every'" in str(caught.value)


def test_overrides_hydra_grammar(tmp_path):
    path = write(tmp_path, MINIMAL)
    spec = load_spec(
        path,
        [
            "allocators.pc.p_upper=0.8",
            "+tracking.wandb.tags=[a,b]",
            "~allocators.grpo",
            "seeds=[1,2]",
            "++eval.every=3",
            "target.baseline=pc",
        ],
    )
    assert spec.allocators["pc"].p_upper == 0.8
    assert spec.tracking.wandb.tags == ("a", "b")
    assert list(spec.allocators) == ["pc"]
    assert spec.seeds == (1, 2)
    assert spec.eval.every == 3


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("budget.step=4", "did you mean 'budget.steps=4'"),
        ("+budget.steps=4", "already set; drop the '+'"),
        ("budget.steps=1,2", "is a sweep"),
        ("~allocators.nope", "nothing to delete"),
        ("budget.steps=[1,", "cannot parse"),
        ("allocators.pc.p_lower=0.9", "p_lower"),
        ("budget.steps=0", "budget.steps: expected greater than 0"),
    ],
)
def test_override_errors(tmp_path, override, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("+", r"\+")) as caught:
        load_spec(write(tmp_path, MINIMAL), [override])
    assert "override" in str(caught.value) or "spec.yaml" in str(caught.value)


@pytest.mark.parametrize(
    ("override", "knob"),
    [("allocators.pc.p_upper=1.8", "p_upper"), ("allocators.pc.p_lower=0.9", "p_lower")],
)
def test_override_error_names_the_overridden_knob(tmp_path, override, knob):
    """A check naming two knobs (p_lower <= p_upper) blames the one the override set, at the
    override, not the other knob at the spec's line (issue 28)."""
    text = MINIMAL.replace("n_commit: 12}", "n_commit: 12, p_lower: 0.125, p_upper: 0.75}")
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, text), [override])
    assert str(caught.value).startswith(f"override '{override}': allocators.pc.{knob}:")


def test_override_error_names_the_override(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, MINIMAL), ["budget.steps=-1"])
    assert str(caught.value).startswith("override 'budget.steps=-1': budget.steps:")


def test_interpolation(tmp_path):
    text = MINIMAL.replace("n: 8}", "n: '${group}'}") + "group: 16\n"
    with pytest.raises(SpecError, match="unknown key 'group'"):
        load_spec(write(tmp_path, text))
    text = MINIMAL.replace("n: 8}", "n: '${allocators.pc.n_pilot}'}").replace(
        "steps: 3", "steps: '${oc.env:ROLLCLI_TEST_STEPS,5}'"
    )
    with pytest.raises(SpecError, match=r"found '5' \(str\); an interpolation gave a string"):
        load_spec(write(tmp_path, text))
    text = text.replace(
        "'${oc.env:ROLLCLI_TEST_STEPS,5}'", "'${oc.decode:${oc.env:ROLLCLI_TEST_STEPS,5}}'"
    )
    spec = load_spec(write(tmp_path, text))
    assert spec.allocators["grpo"].n == 4
    assert spec.budget.steps == 5


def test_preset_expansion_and_explicit_knobs_win(tmp_path):
    text = MINIMAL.replace(
        "{kind: pilot_commit, n_pilot: 4, n_commit: 12}",
        "{kind: pilot_commit, preset: paper-1.5b, p_upper: 0.7}",
    )
    text = text.replace("rollouts_per_step: 64", "rollouts_per_step: 1024")
    data, _ = load_spec_data(write(tmp_path, text))
    assert "preset" not in data["allocators"]["pc"]
    spec = load_spec(write(tmp_path, text))
    assert (spec.allocators["pc"].n_pilot, spec.allocators["pc"].n_commit) == (32, 96)
    assert spec.allocators["pc"].p_upper == 0.7


def test_oracle_needs_sim(tmp_path):
    text = MINIMAL + "  best: {kind: oracle, n_max: 8}\n"
    assert load_spec(write(tmp_path, text)).allocators["best"].kind == "oracle"
    with pytest.raises(SpecError, match="only the sim backend"):
        load_spec(write(tmp_path, text), ["backend={kind: tiny}"])


def test_every_template_and_experiment_validates():
    paths = [
        *sorted((REPO / "rollcli" / "templates" / "specs").glob("*.yaml")),
        *sorted((REPO / "experiments").glob("*.yaml")),
    ]
    checked = 0
    for path in paths:
        if "name:" not in path.read_text():
            continue  # a partial base, used through extends
        load_spec(path)
        checked += 1
    assert checked >= 3


def test_json_schema(tmp_path):
    schema = spec_json_schema()
    json.dumps(schema)
    props = schema["properties"]
    for key in (
        "extends",
        "name",
        "backend",
        "budget",
        "allocators",
        "seeds",
        "eval",
        "target",
        "launch",
        "tracking",
        "checkpoint",
    ):
        assert key in props, key
    assert schema["additionalProperties"] is False
    pc = schema["$defs"]["PilotCommitConfig"]
    assert "preset" in pc["properties"] and "paper-1.5b" in pc["properties"]["preset"]["enum"]
    assert pc["additionalProperties"] is False
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema)
    spec = load_spec(write(tmp_path, MINIMAL))
    jsonschema.validate(spec.to_dict(), schema)
