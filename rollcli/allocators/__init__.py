"""Rollout allocators: pure policy objects behind an ask/tell protocol (numpy + stdlib only).

The protocol and base class are in :mod:`rollcli.allocators.api`, the registry (and the
``rollcli.allocators`` entry-point group for plug-ins) in :mod:`rollcli.allocators.registry`,
state helpers in :mod:`rollcli.allocators.state`. Each allocator module below registers its
kind when imported: a new allocator in rollcli adds its module to this list.
"""

# rollcli's own allocators: importing a module registers its kind
from rollcli.allocators import (  # noqa: F401
    ar3po,
    bayes_budget,
    bots,
    cures,
    dps,
    dynamic,
    gdro,
    greso,
    hora,
    knapsack,
    mopps,
    oracle,
    oracle_budget,
    pilot_commit,
    pods,
    reinforce_ada,
    speed,
    spo,
    uniform,
    vcrl,
    vigor,
    vip,
    xrpo,
)
from rollcli.allocators._common import KeptGroups
from rollcli.allocators.api import (
    AllocatorError,
    Ask,
    AskItem,
    BaseAllocator,
    BudgetLedger,
    Group,
    Outcome,
    PromptSource,
)
from rollcli.allocators.registry import (
    ALLOCATORS,
    CONFIGS,
    ENTRY_POINT_GROUP,
    PRESETS,
    UnknownAllocatorError,
    allocator_kinds,
    create_allocator,
    create_config,
    load_entry_points,
    register_allocator,
    unregister_allocator,
)

__all__ = [
    "ALLOCATORS",
    "CONFIGS",
    "ENTRY_POINT_GROUP",
    "PRESETS",
    "AllocatorError",
    "Ask",
    "AskItem",
    "BaseAllocator",
    "BudgetLedger",
    "Group",
    "KeptGroups",
    "Outcome",
    "PromptSource",
    "UnknownAllocatorError",
    "allocator_kinds",
    "create_allocator",
    "create_config",
    "load_entry_points",
    "register_allocator",
    "unregister_allocator",
]
