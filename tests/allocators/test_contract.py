"""Every registered allocator kind holds to the contract of rollcli.testing.allocator_contract."""

from __future__ import annotations

import pytest

from rollcli.allocators import Group, allocator_kinds
from rollcli.allocators.uniform import UniformAllocator, UniformConfig
from rollcli.testing.allocator_contract import (
    AllocatorContract,
    ContractCase,
    ContractRun,
    contract_cases,
)

CASES = contract_cases()


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest) -> ContractCase:
    return request.param


class TestAllocatorContract(AllocatorContract):
    pass


def test_every_registered_kind_has_contract_cases() -> None:
    assert sorted({c.kind for c in CASES}) == allocator_kinds()


# -- the suite itself: a factory case runs it, and it catches what it promises to catch -----


class _Uniform(UniformAllocator):
    """Uniform under test doubles below (not registered: the suite gets them by factory)."""

    config_class = UniformConfig


class _Overspends(_Uniform):
    @property
    def max_step_rollouts(self) -> int:
        return self.rollouts_per_step - 1


class _NoBound(_Uniform):
    @property
    def max_step_rollouts(self) -> int:
        return None  # type: ignore[return-value]


class _TrainsTwice(_Uniform):
    def _train_groups(self) -> list[Group]:
        groups = super()._train_groups()
        return groups + groups[:1]


class _StatsComeAndGo(_Uniform):
    def stats(self) -> dict[str, float]:
        extra = {"warmup": 1.0} if self.step == 0 else {}
        return {**super().stats(), **extra}


class _StatsDropTheBase(_Uniform):
    def stats(self) -> dict[str, float]:
        return {"buffer": 0.0}


class _StatsNotNumbers(_Uniform):
    def stats(self) -> dict[str, float]:
        return {**super().stats(), "full": True}  # type: ignore[dict-item]


class _StatsNotFinite(_Uniform):
    def stats(self) -> dict[str, float]:
        return {**super().stats(), "ratio": float("inf")}


class _StatsMutate(_Uniform):
    def stats(self) -> dict[str, float]:
        self.rng.random()  # reading a counter must not move the generator
        return super().stats()


class _HoldsTrained(_Uniform):
    """Keeps every rollout it ever trained alive: memory that grows for nothing."""

    def _train_groups(self) -> list[Group]:
        groups = super()._train_groups()
        self.kept = getattr(self, "kept", set()) | {r for g in groups for r in g.refs}
        return groups

    def live_refs(self) -> set:
        return set(getattr(self, "kept", set()))


class _LiveRefsList(_Uniform):
    def live_refs(self) -> list:  # type: ignore[override]
        return []


def _case(cls: type, name: str) -> ContractCase:
    return ContractCase(
        factory=lambda **kw: cls(UniformConfig(n=4), **kw), rollouts_per_step=32, name=name
    )


def test_factory_cases_run_the_whole_suite() -> None:
    case = _case(_Uniform, "uniform-by-factory")
    assert case.kind == "uniform" and case.id == "uniform-by-factory"
    suite = AllocatorContract()
    suite.test_invariants_hold_over_a_run(case)
    suite.test_same_seed_same_decisions(case)
    suite.test_state_round_trip_mid_step(case)
    by_config = ContractRun(ContractCase({"kind": "uniform", "n": 4}, 32), seed=1).run()
    by_factory = ContractRun(case, seed=1).run()
    assert by_factory.trace == by_config.trace
    with pytest.raises(ValueError, match="either config= or factory="):
        ContractCase()
    with pytest.raises(ValueError, match="needs a name"):
        ContractCase(factory=case.factory)


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (_Overspends, r"generated 32 > bound 31"),
        (_NoBound, "max_step_rollouts must be an int >= 1, got None"),
        (_TrainsTwice, "trained twice"),
        (_StatsComeAndGo, r"stats\(\) keys changed at step 1: \['warmup'\]"),
        (_StatsDropTheBase, r"stats\(\) lacks \['deferred', 'epoch', 'evicted'\]"),
        (_StatsNotNumbers, r"stats\(\)\['full'\] must be an int or float, got True"),
        (_StatsNotFinite, r"stats\(\)\['ratio'\] = inf"),
        (_StatsMutate, r"reading stats\(\) changed the allocator"),
        (_HoldsTrained, r"live_refs\(\) holds refs already trained"),
        (_LiveRefsList, r"live_refs\(\) must return a set, got list"),
    ],
)
def test_the_suite_catches_a_broken_allocator(cls: type, match: str) -> None:
    with pytest.raises(AssertionError, match=match):
        ContractRun(_case(cls, cls.__name__), seed=0).run()
