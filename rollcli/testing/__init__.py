"""Test helpers shared by the allocator, backend and train-loop tests (numpy + stdlib only).

:mod:`rollcli.testing.fakes` holds :class:`~rollcli.testing.fakes.FakeBackend`, a small honest
backend with fixed per-prompt success probabilities; :mod:`rollcli.testing.allocator_contract`
holds the contract suite every registered allocator kind must pass.
"""

from rollcli.testing.fakes import FakeBackend, ScriptedBackend, drive_step

__all__ = ["FakeBackend", "ScriptedBackend", "drive_step"]
