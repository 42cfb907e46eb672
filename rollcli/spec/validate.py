"""Validate raw spec data into the frozen ``Spec``; every failure becomes one clear line.

Wrongly typed scalars and pydantic errors are described by :mod:`rollcli.spec.diagnose`
(``file:line:col: field.path: expected ..., found ...``). After the models, the spec's own
cross-field rules (distinct seeds and base seeds, base seeds only where the backend has
one, the target baseline is an allocator, a target value when
``at: value``) are checked here, and each component is asked for its own
(:mod:`rollcli.spec.checks`: allocators against the budget and backend, the eval section
against the benchmark registry and backend), with the same kind of message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import ValidationError

from rollcli.errors import suggest
from rollcli.spec.diagnose import describe_error, raise_first, scalar_errors
from rollcli.spec.models import SpecBase, spec_model
from rollcli.spec.yamlio import Marks, Path_, dotted

__all__ = ["validate_spec"]


def _cross_checks(spec: Any, data: dict[str, Any], marks: Marks) -> Any:
    from rollcli.spec.checks import component_problems

    errors: list[tuple[Any, str]] = []

    def fail(path: Path_, message: str) -> None:
        errors.append((marks.find(path), f"{dotted(path)}: {message}"))

    for path, message in component_problems(spec, data, marks):
        fail(path, message)
    if len(set(spec.seeds)) != len(spec.seeds):
        dup = next(s for s in spec.seeds if spec.seeds.count(s) > 1)
        fail(("seeds",), f"seed {dup} is listed twice")
    if spec.base_seeds is not None:
        if not any(f.name == "base_seed" for f in dataclasses.fields(spec.backend)):
            fail(
                ("base_seeds",),
                f"the {spec.backend.kind} backend has no base_seed to vary "
                "(base_seeds needs a backend that builds its base model: tiny)",
            )
        if len(set(spec.base_seeds)) != len(spec.base_seeds):
            dup = next(s for s in spec.base_seeds if spec.base_seeds.count(s) > 1)
            fail(("base_seeds",), f"base seed {dup} is listed twice")
    names = list(spec.allocators)
    baseline = spec.target.baseline
    if baseline is None:
        uniform = [n for n, c in spec.allocators.items() if c.kind == "uniform"]
        baseline = (uniform or names)[0]
    elif baseline not in spec.allocators:
        hint = suggest(baseline, names)
        fail(
            ("target", "baseline"),
            f"expected one of the allocators ({', '.join(names)}), found '{baseline}'{hint}",
        )
    if spec.target.at == "value" and spec.target.value is None:
        fail(("target", "value"), "target.at is 'value': set target.value (e.g. 0.5)")
    if spec.target.at == "rise" and not (
        spec.target.value is not None and 0 < spec.target.value <= 1
    ):
        fail(
            ("target", "value"),
            "target.at is 'rise': set target.value to the fraction of the baseline's rise, "
            f"in (0, 1] (e.g. 0.5), found {spec.target.value}",
        )
    if spec.target.at not in ("value", "rise") and spec.target.value is not None:
        fail(
            ("target", "value"),
            f"is only used with at: value or at: rise (at is '{spec.target.at}')",
        )
    if errors:
        raise_first(errors)
    if baseline != spec.target.baseline:
        spec = spec.model_copy(
            update={"target": spec.target.model_copy(update={"baseline": baseline})}
        )
    return spec


def validate_spec(data: dict[str, Any], marks: Marks) -> SpecBase:
    """Validate composed raw data into a frozen ``Spec``; raise :class:`SpecError` on any fault."""
    from rollcli.spec.limits import check_finite

    check_finite(data, marks)
    model = spec_model()
    wrong_scalars = scalar_errors(data, marks)
    if wrong_scalars:
        raise_first(wrong_scalars)
    try:
        spec = model.model_validate(data)
    except ValidationError as error:
        errors = [describe_error(e, data, marks) for e in error.errors()]
    else:
        return _cross_checks(spec, data, marks)  # type: ignore[no-any-return]
    raise_first(errors)
    raise AssertionError("unreachable")
