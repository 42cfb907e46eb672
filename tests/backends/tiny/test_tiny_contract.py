"""The tiny backend passes the backend contract suite (rollcli/testing/backend_contract.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.backends import create_backend
from rollcli.backends.api import BaseBackend
from rollcli.testing.backend_contract import BackendContract

from .conftest import micro_config


class TestTinyBackendContract(BackendContract):
    num_rollouts = 4

    @pytest.fixture(autouse=True)
    def _cache(self, tiny_cache: Path) -> None:
        self.cache = tiny_cache

    def make_backend(self, seed: int) -> BaseBackend:
        return create_backend(micro_config(self.cache), seed=seed)


class TestTinyBackendContractOneMinibatch(TestTinyBackendContract):
    """The same contract with the whole batch as one mini-batch (the default is 4)."""

    def make_backend(self, seed: int) -> BaseBackend:
        return create_backend(micro_config(self.cache, num_minibatches=1), seed=seed)
