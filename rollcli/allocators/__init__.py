"""Rollout allocators: pure policy objects behind an ask/tell protocol (numpy + stdlib only)."""

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
    PRESETS,
    UnknownAllocatorError,
    allocator_kinds,
    create_allocator,
    create_config,
)

__all__ = [
    "ALLOCATORS",
    "PRESETS",
    "AllocatorError",
    "Ask",
    "AskItem",
    "BaseAllocator",
    "BudgetLedger",
    "Group",
    "Outcome",
    "PromptSource",
    "UnknownAllocatorError",
    "allocator_kinds",
    "create_allocator",
    "create_config",
]
