"""The plug-in holds to rollcli's allocator contract (run from its own package, by factory)."""

from __future__ import annotations

import pytest
from rollcli_demo_plugin import RandomBaselineAllocator, RandomBaselineConfig

from rollcli.testing.allocator_contract import AllocatorContract, ContractCase


def factory(n: int):
    """The allocator with ``n`` rollouts per prompt, made the way the contract suite asks."""
    return lambda **kwargs: RandomBaselineAllocator(RandomBaselineConfig(n=n), **kwargs)


CASES = [
    ContractCase(factory=factory(n), rollouts_per_step=32, name=f"demo_random[n={n}]")
    for n in (2, 4)
]


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest) -> ContractCase:
    return request.param


class TestRandomBaselineContract(AllocatorContract):
    pass
