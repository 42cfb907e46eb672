"""The plug-in surface in-process: register_allocator, the rollcli.allocators entry points
(found by importlib.metadata in a dist-info folder on sys.path), and every place that lists
kinds picking up one registered late (spec model, schema, presets, init, error messages)."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from rollcli.allocators import (
    ALLOCATORS,
    PRESETS,
    Ask,
    AskItem,
    BaseAllocator,
    Group,
    Outcome,
    UnknownAllocatorError,
    allocator_kinds,
    create_allocator,
    create_config,
    load_entry_points,
    register_allocator,
    unregister_allocator,
)
from rollcli.allocators.uniform import UniformAllocator
from rollcli.errors import SpecError
from rollcli.spec import load_spec, spec_json_schema
from rollcli.spec.models import spec_model

PLUGIN_SRC = Path(__file__).parent / "plugin_pkg"

pytestmark = pytest.mark.usefixtures("clean_registry")


@dataclasses.dataclass(frozen=True)
class TwiceConfig:
    """Uniform with n rollouts, under another kind (a late-registered kind for these tests)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["test_twice"] = "test_twice"
    n: int = 2


class TwiceAllocator(UniformAllocator):
    """Uniform's algorithm under the kind ``test_twice``."""

    config_class = TwiceConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {"four": {"n": 4}}


SPEC = """\
name: late
backend: {kind: sim, num_train_prompts: 64, num_eval_prompts: 32}
budget: {steps: 2, rollouts_per_step: 16}
allocators:
  grpo: {kind: uniform, n: 4}
  mine: {kind: KIND, preset: PRESET}
tracking: {wandb: {mode: disabled}}
"""


def write_spec(tmp_path: Path, kind: str, preset: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("KIND", kind).replace("PRESET", preset))
    return path


# -- register_allocator ----------------------------------------------------------------------


def test_kind_comes_from_the_config_class() -> None:
    assert TwiceAllocator.kind == "test_twice"
    assert UniformAllocator.kind == "uniform"
    with pytest.raises(TypeError, match="drop the class attribute"):

        class Mismatch(UniformAllocator):
            config_class = TwiceConfig
            kind = "other"


def test_register_as_decorator_or_call_and_create(tmp_path: Path) -> None:
    assert register_allocator(TwiceAllocator) is TwiceAllocator
    assert register_allocator(replace=False)(TwiceAllocator) is TwiceAllocator  # same class: no-op
    assert "test_twice" in allocator_kinds() and ALLOCATORS["test_twice"][1] is TwiceAllocator
    assert PRESETS["test_twice"] == {"four": {"n": 4}}
    PRESETS["test_twice"]["four"]["n"] = 99  # a copy: the registry keeps its own
    assert create_config({"kind": "test_twice", "preset": "four"}) == TwiceConfig(n=4)
    allocator = create_allocator(
        {"kind": "test_twice", "preset": "four"}, num_prompts=10, rollouts_per_step=8, seed=0
    )
    assert isinstance(allocator, TwiceAllocator) and allocator.batch_prompts == 2
    unregister_allocator("test_twice")
    with pytest.raises(UnknownAllocatorError, match="unknown allocator kind 'test_twice'"):
        create_config({"kind": "test_twice"})


def test_another_class_under_a_registered_kind_needs_replace() -> None:
    class Other(TwiceAllocator):
        config_class = TwiceConfig

    register_allocator(TwiceAllocator)
    with pytest.raises(ValueError, match="already registered by TwiceAllocator"):
        register_allocator(Other)
    register_allocator(Other, replace=True)
    assert ALLOCATORS["test_twice"][1] is Other


def _config(kind: str = "test_bad", *, frozen: bool = True, forbid: bool = True) -> type:
    namespace: dict[str, Any] = {"__annotations__": {"kind": Literal[kind], "n": int}}
    namespace.update(kind=kind, n=2)
    if forbid:
        namespace["__pydantic_config__"] = {"extra": "forbid"}
    return dataclasses.dataclass(frozen=frozen)(type("BadConfig", (), namespace))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: type("NotAnAllocator", (), {}), "not a subclass of"),
        (lambda: type("Abstract", (BaseAllocator,), {"config_class": _config()}), "implement"),
        (lambda: type("NoConfig", (UniformAllocator,), {}), "must set config_class"),
        (
            lambda: type("Thawed", (UniformAllocator,), {"config_class": _config(frozen=False)}),
            "frozen",
        ),
        (
            lambda: type("Lax", (UniformAllocator,), {"config_class": _config(forbid=False)}),
            "extra",
        ),
        (
            lambda: type("Spaced", (UniformAllocator,), {"config_class": _config("bad kind")}),
            "letters, digits",
        ),
        (
            lambda: type(
                "BadPreset",
                (UniformAllocator,),
                {"config_class": _config(), "presets": {"p": {"nn": 3}}},
            ),
            "preset 'p' does not build",
        ),
    ],
)
def test_register_rejects_what_would_break_later(make: Any, match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        register_allocator(make())


def test_kind_must_be_a_literal_of_itself() -> None:
    @dataclasses.dataclass(frozen=True)
    class StrKind:
        __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
        kind: str = "test_str"

    class StrAllocator(UniformAllocator):
        config_class = StrKind

    with pytest.raises(TypeError, match=r"annotated Literal\['test_str'\]"):
        register_allocator(StrAllocator)


def test_base_declares_max_step_rollouts_and_checks_the_config_type() -> None:
    class NoBound(BaseAllocator):
        config_class = TwiceConfig

        def _ask(self) -> Ask | None:
            return Ask((AskItem(0, 1),))

        def _tell(self, outcomes: list[Outcome]) -> None:
            pass

        def _train_groups(self) -> list[Group]:
            return []

    with pytest.raises(TypeError, match="max_step_rollouts"):
        NoBound(TwiceConfig(), num_prompts=4, rollouts_per_step=4, seed=0)
    with pytest.raises(TypeError, match="takes a TwiceConfig, got UniformConfig"):
        TwiceAllocator(
            create_config({"kind": "uniform"}), num_prompts=4, rollouts_per_step=4, seed=0
        )


# -- a kind registered after the spec model was built ----------------------------------------


def test_late_kind_in_spec_schema_presets_and_errors(tmp_path: Path, cli: Any) -> None:
    before = spec_model()  # built (and cached) without the new kind
    with pytest.raises(SpecError, match="unknown allocator kind 'test_twice'"):
        load_spec(write_spec(tmp_path, "test_twice", "four"))
    register_allocator(TwiceAllocator)
    spec = load_spec(write_spec(tmp_path, "test_twice", "four"))
    assert spec.allocators["mine"] == TwiceConfig(n=4)
    assert spec_model() is not before and spec_model() is spec_model()
    with pytest.raises(SpecError, match=r"did you mean 'test_twice'\?.*test_twice"):
        load_spec(write_spec(tmp_path, "test_twise", "four"))
    with pytest.raises(SpecError, match="unknown preset 'fuor'.*four"):
        load_spec(write_spec(tmp_path, "test_twice", "fuor"))
    schema = spec_json_schema()
    assert schema["$defs"]["TwiceConfig"]["properties"]["preset"]["enum"] == ["four"]
    listed = cli(["init", "--list"])
    assert "test_twice" in listed.stdout.split() and "four" in listed.stdout
    written = cli(["init", "exp", "--dir", tmp_path])
    assert written.exit_code == 0, written.output
    assert "#   test_twice  " in (tmp_path / "exp.yaml").read_text()
    with pytest.raises(UnknownAllocatorError, match="Did you mean 'test_twice'"):
        create_config({"kind": "test_twise"})


# -- entry points ----------------------------------------------------------------------------


def _dist_info(site: Path, dist: str, entry_points: dict[str, str]) -> None:
    """A minimal installed distribution: what ``pip install`` leaves for importlib.metadata."""
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[rollcli.allocators]\n{lines}")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for fake installed distributions; imported plug-ins are forgotten."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.syspath_prepend(str(PLUGIN_SRC))
    modules = set(sys.modules)
    yield folder
    for name in set(sys.modules) - modules:
        if name.startswith(("rollcli_demo_plugin", "rollcli_test_")):
            del sys.modules[name]


def test_entry_point_class_is_loaded_lazily(site: Path, tmp_path: Path) -> None:
    load_entry_points()  # the scan is done once, before this distribution exists
    _dist_info(
        site, "rollcli-demo-plugin", {"demo_random": "rollcli_demo_plugin:RandomBaselineAllocator"}
    )
    assert "demo_random" not in allocator_kinds()
    assert load_entry_points(refresh=True) == {}
    assert "rollcli_demo_plugin" in sys.modules
    assert "demo_random" in allocator_kinds()
    config = create_config({"kind": "demo_random", "preset": "small"})
    assert config.n == 2
    spec = load_spec(write_spec(tmp_path, "demo_random", "small"))
    assert spec.allocators["mine"].n == 2


def test_entry_point_module_registers_on_import(site: Path) -> None:
    (site / "rollcli_test_module_plugin.py").write_text(
        textwrap.dedent(
            '''
            """A plug-in module that registers its allocator when imported."""
            import dataclasses
            from typing import Any, ClassVar, Literal

            from rollcli.allocators import register_allocator
            from rollcli.allocators.uniform import UniformAllocator


            @dataclasses.dataclass(frozen=True)
            class EightConfig:
                __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
                kind: Literal["test_eight"] = "test_eight"
                n: int = 8


            @register_allocator
            class EightAllocator(UniformAllocator):
                config_class = EightConfig
            '''
        )
    )
    _dist_info(site, "rollcli-test-module-plugin", {"anything": "rollcli_test_module_plugin"})
    assert load_entry_points(refresh=True) == {}
    assert ALLOCATORS["test_eight"][0].__name__ == "EightConfig"


def test_broken_plugins_are_reported_and_do_not_stop_the_others(site: Path, tmp_path: Path) -> None:
    _dist_info(
        site,
        "rollcli-broken",
        {
            "test_missing": "rollcli_test_no_such_module:Allocator",
            "test_misnamed": "rollcli_demo_plugin:RandomBaselineAllocator",
        },
    )
    with pytest.warns(RuntimeWarning) as warned:
        errors = load_entry_points(refresh=True)
    assert sorted(str(w.message).split("'")[1] for w in warned) == ["test_misnamed", "test_missing"]
    assert "ModuleNotFoundError" in errors["test_missing"]
    assert "name the entry point after the kind" in errors["test_misnamed"]
    assert "uniform" in allocator_kinds() and "demo_random" not in allocator_kinds()
    with pytest.raises(UnknownAllocatorError, match="Plug-in 'test_missing' failed to load"):
        create_config({"kind": "test_missing"})
    with pytest.raises(SpecError, match="its plug-in failed to load: rollcli_test_no_such_module"):
        load_spec(write_spec(tmp_path, "test_missing", "x"))


def test_the_plugin_package_is_not_in_the_shared_venv() -> None:
    import importlib.metadata

    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("rollcli-demo-plugin")
    # the package declares the entry point the tests above fake with a dist-info folder
    text = (PLUGIN_SRC / "pyproject.toml").read_text()
    assert 'demo_random = "rollcli_demo_plugin:RandomBaselineAllocator"' in text
