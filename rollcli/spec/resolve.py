"""After overrides: ``${...}`` interpolations resolved with OmegaConf, then allocator presets.

Interpolations are first bounded statically (:func:`rollcli.spec.limits.check_interpolations`);
an error names the value that failed. ``preset: <name>`` in an allocator is replaced by the
preset's knobs from the allocator registry (knobs written in the spec win).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from rollcli.errors import SpecError, suggest
from rollcli.spec.yamlio import Mark, Marks, Path_, dotted

__all__ = ["expand_presets", "resolve_interpolations"]


def _interpolated(node: Any, path: Path_ = ()) -> list[Path_]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _interpolated(v, path + (k,))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _interpolated(v, path + (i,))]
    return [path] if isinstance(node, str) and "${" in node else []


RESOLVE_BUDGET_S = 5.0


class _OutOfTime(BaseException):
    """Raised by the timer inside OmegaConf (a BaseException: its ``except Exception`` does not
    swallow it)."""


@contextlib.contextmanager
def _deadline(seconds: float, marks: Marks) -> Iterator[None]:
    """Interpolation under a wall-clock budget besides the static one (main thread only: the
    timer is a signal). Past it, a one-line :class:`SpecError` naming the spec."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _OutOfTime:
        raise SpecError(
            f"{marks.find(())}: resolving the interpolations took more than {seconds:g} s; "
            "simplify them"
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def resolve_interpolations(data: dict[str, Any], marks: Marks) -> dict[str, Any]:
    """Resolve ``${...}`` with OmegaConf; an error names the value that failed."""
    paths = _interpolated(data)
    if not paths:
        return data
    from rollcli.spec.limits import check_interpolations

    check_interpolations(data, marks, paths)
    marks.interpolated.update(paths)
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = OmegaConf.create(data)
    except OmegaConfBaseException as error:
        raise SpecError(f"{marks.find(())}: cannot interpolate the spec: {error}") from None
    with _deadline(RESOLVE_BUDGET_S, marks):
        for path in paths:
            node: Any = config
            try:
                for part in path:
                    node = node[part]
            except OmegaConfBaseException as error:
                message = str(error).splitlines()[0]
                raise SpecError(
                    f"{marks.find(path)}: {dotted(path)}: cannot resolve the interpolation: "
                    f"{message}"
                ) from None
        container = OmegaConf.to_container(config, resolve=True)
    assert isinstance(container, dict)
    return container  # type: ignore[return-value]


def expand_presets(data: dict[str, Any], marks: Marks) -> dict[str, Any]:
    """Replace ``preset: <name>`` in each allocator by the preset's knobs (explicit knobs win)."""
    allocators = data.get("allocators")
    if not isinstance(allocators, dict):
        return data
    from rollcli.allocators.registry import ALLOCATORS, PRESETS

    out = dict(data)
    out["allocators"] = dict(allocators)
    for name, config in allocators.items():
        if not isinstance(config, dict) or "preset" not in config:
            continue
        path: Path_ = ("allocators", name, "preset")
        kind = config.get("kind")
        if kind not in ALLOCATORS:
            continue  # the model reports the unknown kind
        presets = PRESETS.get(kind, {})
        preset = config["preset"]
        if preset not in presets:
            raise SpecError(
                f"{marks.find(path)}: {dotted(path)}: unknown preset {preset!r} for allocator "
                f"kind '{kind}'{suggest(preset, presets, listing=True)}"
            )
        expanded = {**presets[preset], **{k: v for k, v in config.items() if k != "preset"}}
        for knob in presets[preset]:
            if knob not in config:
                marks.values[("allocators", name, knob)] = marks.find(path) or Mark("<preset>")
        out["allocators"][name] = expanded
    return out
