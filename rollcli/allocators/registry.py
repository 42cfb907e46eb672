"""The allocator registry: kinds, their config classes and presets; plug-ins by entry point.

An allocator class joins the registry with :func:`register_allocator` (a decorator, or a plain
call), under the kind its config class names. rollcli's own allocators register when
:mod:`rollcli.allocators` is imported. A third-party package registers its own without touching
rollcli by declaring an entry point in the ``rollcli.allocators`` group::

    [project.entry-points."rollcli.allocators"]
    my_kind = "my_package.my_module:MyAllocator"

Entry points are loaded once, the first time anything reads the registry (never at import, so
``rollcli --help`` stays fast). A plug-in that fails to load is reported -- a warning, and a
line in the "unknown allocator kind" error -- and does not stop the other kinds. Everything
that lists kinds (the spec schema, ``rollcli schema``, presets, ``rollcli init --list``, the
error messages) reads the registry, so a registered kind shows up everywhere.

``ALLOCATORS`` (kind -> ``(config class, allocator class)``), ``CONFIGS`` and ``PRESETS`` (kind
-> preset name -> knobs) are read-only views of the registry.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib.metadata
import inspect
import re
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, TypeVar, overload

from rollcli.allocators.api import BaseAllocator, OracleFn, config_kind

__all__ = [
    "ALLOCATORS",
    "CONFIGS",
    "ENTRY_POINT_GROUP",
    "PRESETS",
    "AllocatorEntry",
    "UnknownAllocatorError",
    "allocator_kinds",
    "create_allocator",
    "create_config",
    "load_entry_points",
    "register_allocator",
    "unregister_allocator",
]

ENTRY_POINT_GROUP = "rollcli.allocators"
_KIND_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

A = TypeVar("A", bound=type[BaseAllocator])


class UnknownAllocatorError(ValueError):
    """An allocator kind, preset or knob that does not exist (the message lists the valid ones)."""


@dataclasses.dataclass(frozen=True)
class AllocatorEntry:
    """One registered kind: its config and allocator classes, presets, and who registered it."""

    kind: str
    config_class: type
    allocator_class: type[BaseAllocator]
    presets: Mapping[str, Mapping[str, Any]]
    origin: str  # the allocator's module, or "entry point <name> (<distribution>)"


_ENTRIES: dict[str, AllocatorEntry] = {}
_ENTRY_POINTS_LOADED = False
_PLUGIN_ERRORS: dict[str, str] = {}  # entry-point name -> what went wrong


# -- registering -----------------------------------------------------------------------------


@overload
def register_allocator(cls: A, *, replace: bool = False) -> A: ...
@overload
def register_allocator(cls: None = None, *, replace: bool = False) -> Callable[[A], A]: ...
def register_allocator(cls: A | None = None, *, replace: bool = False) -> A | Callable[[A], A]:
    """Register an allocator class under the kind its ``config_class`` names; returns the class.

    Use as ``@register_allocator`` or ``register_allocator(MyAllocator)``. The class must be a
    concrete :class:`BaseAllocator` subclass whose ``config_class`` is a frozen dataclass with
    ``kind: Literal["<kind>"] = "<kind>"`` and ``__pydantic_config__ = {"extra": "forbid"}``;
    its ``presets`` must build. Registering the same class again is a no-op; another class
    under a registered kind fails unless ``replace=True``.
    """

    def register(allocator_class: A) -> A:
        entry = _entry_for(allocator_class, origin=allocator_class.__module__)
        current = _ENTRIES.get(entry.kind)
        if current is not None and current.allocator_class is not allocator_class and not replace:
            raise ValueError(
                f"allocator kind '{entry.kind}' is already registered by "
                f"{current.allocator_class.__qualname__} ({current.origin}); "
                "pick another kind or pass replace=True"
            )
        _ENTRIES[entry.kind] = entry
        return allocator_class

    return register if cls is None else register(cls)


def unregister_allocator(kind: str) -> None:
    """Remove a kind from the registry (for tests that register a temporary kind)."""
    if _ENTRIES.pop(kind, None) is None:
        raise UnknownAllocatorError(f"allocator kind '{kind}' is not registered")


def _entry_for(allocator_class: Any, *, origin: str) -> AllocatorEntry:
    name = getattr(allocator_class, "__qualname__", repr(allocator_class))
    if not (isinstance(allocator_class, type) and issubclass(allocator_class, BaseAllocator)):
        raise TypeError(f"{name} is not a subclass of rollcli.allocators.BaseAllocator")
    if inspect.isabstract(allocator_class):
        missing = ", ".join(sorted(allocator_class.__abstractmethods__))
        raise TypeError(f"{name} does not implement {missing}")
    config_class = allocator_class.__dict__.get("config_class")
    if config_class is None:
        raise TypeError(f"{name} must set config_class = <its frozen config dataclass>")
    kind = config_kind(config_class)
    if not _KIND_PATTERN.match(kind):
        raise ValueError(
            f"allocator kind {kind!r}: use letters, digits and '_', starting with a letter"
        )
    params = getattr(config_class, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{config_class.__name__} must be a @dataclass(frozen=True)")
    if getattr(config_class, "__pydantic_config__", None) != {"extra": "forbid"}:
        raise TypeError(
            f"{config_class.__name__} must set "
            '__pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"} '
            "(so a spec with a misspelt knob fails)"
        )
    try:
        hint = typing.get_type_hints(config_class).get("kind")
    except Exception as error:
        raise TypeError(
            f"cannot resolve the annotations of {config_class.__name__}: {error}"
        ) from None
    if typing.get_origin(hint) is not Literal or typing.get_args(hint) != (kind,):
        raise TypeError(f"{config_class.__name__}.kind must be annotated Literal[{kind!r}]")
    presets = {str(k): dict(v) for k, v in dict(allocator_class.presets).items()}
    for preset, knobs in presets.items():
        try:
            config_class(**knobs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: preset '{preset}' does not build: {error}") from error
    return AllocatorEntry(kind, config_class, allocator_class, presets, origin)


# -- entry points ----------------------------------------------------------------------------


def load_entry_points(*, refresh: bool = False) -> dict[str, str]:
    """Load the ``rollcli.allocators`` entry points (once); returns the failures by name.

    An entry point names an allocator class (registered here if its module did not register it
    on import already) or a module that registers its allocators when imported. The entry
    point's name must be the class's kind. ``refresh`` scans again (a package installed since,
    or a failed plug-in retried); kinds already registered stay.
    """
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED and not refresh:
        return dict(_PLUGIN_ERRORS)
    _ENTRY_POINTS_LOADED = True
    _PLUGIN_ERRORS.clear()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep.dist, "name", None) or "?"
        origin = f"entry point {ep.name} ({dist})"
        try:
            target = ep.load()
            if inspect.ismodule(target):
                continue  # importing it registered its allocators
            entry = _entry_for(target, origin=origin)
            if entry.kind != ep.name:
                raise ValueError(
                    f"the entry point is named '{ep.name}' but {target.__qualname__} is of kind "
                    f"'{entry.kind}'; name the entry point after the kind"
                )
            current = _ENTRIES.get(entry.kind)
            if current is None:
                _ENTRIES[entry.kind] = entry
            elif current.allocator_class is not target:
                raise ValueError(
                    f"kind '{entry.kind}' is already registered by "
                    f"{current.allocator_class.__qualname__} ({current.origin})"
                )
        except Exception as error:  # a broken plug-in must not take the other kinds down
            message = f"{ep.value} from {dist}: {type(error).__name__}: {error}"
            _PLUGIN_ERRORS[ep.name] = message
            warnings.warn(
                f"rollcli: allocator plug-in '{ep.name}' failed to load ({message})",
                RuntimeWarning,
                stacklevel=2,
            )
    return dict(_PLUGIN_ERRORS)


def _entries() -> dict[str, AllocatorEntry]:
    if not _ENTRY_POINTS_LOADED:
        load_entry_points()
    return _ENTRIES


# -- reading ---------------------------------------------------------------------------------


class _View(Mapping[str, Any]):
    """A read-only view of the registry, kind -> ``get(entry)``; reading loads the entry points."""

    def __init__(self, get: Callable[[AllocatorEntry], Any], what: str) -> None:
        self._get = get
        self._what = what

    def __getitem__(self, kind: str) -> Any:
        return self._get(_entries()[kind])

    def __iter__(self) -> Iterator[str]:
        return iter(list(_entries()))

    def __len__(self) -> int:
        return len(_entries())

    def __contains__(self, kind: object) -> bool:
        return kind in _entries()

    def __repr__(self) -> str:
        return f"<rollcli {self._what}: {', '.join(sorted(_entries()))}>"


ALLOCATORS: Mapping[str, tuple[type, type[BaseAllocator]]] = _View(
    lambda e: (e.config_class, e.allocator_class), "allocators"
)
CONFIGS: Mapping[str, type] = _View(lambda e: e.config_class, "allocator configs")
# copies: a caller that edits a preset's knobs changes nothing in the registry
PRESETS: Mapping[str, dict[str, dict[str, Any]]] = _View(
    lambda e: copy.deepcopy(dict(e.presets)), "allocator presets"
)


def allocator_kinds() -> list[str]:
    """Every registered kind, sorted (entry points included)."""
    return sorted(_entries())


def _suggest(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return f"{hint} Valid: {', '.join(sorted(valid))}."


def _unknown_kind(kind: Any) -> UnknownAllocatorError:
    message = f"unknown allocator kind '{kind}'." + _suggest(str(kind), list(_entries()))
    for name, error in sorted(_PLUGIN_ERRORS.items()):
        message += f" (Plug-in '{name}' failed to load: {error})"
    return UnknownAllocatorError(message)


def create_config(mapping: Mapping[str, Any]) -> Any:
    """Build a frozen config from ``{kind: ..., preset: ..., <knobs>}`` (preset values first)."""
    values = dict(mapping)
    kind = values.get("kind")
    entries = _entries()
    if kind not in entries:
        raise _unknown_kind(kind)
    entry = entries[kind]
    preset = values.pop("preset", None)
    if preset is not None:
        if preset not in entry.presets:
            raise UnknownAllocatorError(
                f"unknown preset '{preset}' for allocator '{kind}'."
                + _suggest(str(preset), list(entry.presets))
            )
        values = {**copy.deepcopy(dict(entry.presets[preset])), **values}
    names = [f.name for f in dataclasses.fields(entry.config_class)]
    for key in values:
        if key not in names:
            raise UnknownAllocatorError(
                f"allocator '{kind}' has no knob '{key}'." + _suggest(key, names)
            )
    return entry.config_class(**values)


def create_allocator(
    config: Any,
    *,
    num_prompts: int,
    rollouts_per_step: int,
    seed: int,
    oracle: OracleFn | None = None,
) -> BaseAllocator:
    """Create an allocator from a config object or a ``{kind: ...}`` mapping."""
    if isinstance(config, Mapping):
        config = create_config(config)
    entries = _entries()
    kind = getattr(config, "kind", None)
    if kind not in entries:
        raise _unknown_kind(kind)
    return entries[kind].allocator_class(
        config,
        num_prompts=num_prompts,
        rollouts_per_step=rollouts_per_step,
        seed=seed,
        oracle=oracle,
    )
