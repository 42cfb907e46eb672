"""The negative control's patch: the initial sync and the one after step 1's update are made,
the syncs from step 2's update on are not (so one GRPO job checks both a working sync after an
update and a skipped one: ``test_verl_vllm_grpo.py``)."""

from __future__ import annotations

import importlib

import pytest

pytestmark = pytest.mark.verl


def test_syncs_from_step_2_on_are_skipped(monkeypatch, capsys):
    base = pytest.importorskip("verl.checkpoint_engine.base")
    made: list[int | None] = []

    def original(self, global_steps=None):
        made.append(global_steps)
        return {"synced": global_steps}

    # restored after the test: the patch never leaks into other tests of this process
    monkeypatch.setattr(base.CheckpointEngineManager, "update_weights", original)
    module = importlib.import_module("rollcli.backends.verl.skip_weight_syncs")
    module.install()
    manager = object.__new__(base.CheckpointEngineManager)
    results = [manager.update_weights(step) for step in range(4)]
    assert made == [0, 1]
    assert results == [{"synced": 0}, {"synced": 1}, {}, {}]
    assert "weight sync of step 2 skipped" in capsys.readouterr().out
    module.install()  # a second install does not wrap the wrapper
    manager.update_weights(1)
    assert made == [0, 1, 1]
