"""Every registered allocator kind holds to the contract of rollcli.testing.allocator_contract."""

from __future__ import annotations

import pytest

from rollcli.allocators import allocator_kinds
from rollcli.testing.allocator_contract import AllocatorContract, ContractCase, contract_cases

CASES = contract_cases()


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest) -> ContractCase:
    return request.param


class TestAllocatorContract(AllocatorContract):
    pass


def test_every_registered_kind_has_contract_cases() -> None:
    assert sorted({c.kind for c in CASES}) == allocator_kinds()
