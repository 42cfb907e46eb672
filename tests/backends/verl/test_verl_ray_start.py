"""A verl job's local Ray start, started again when it runs out of Ray's fixed 30 s."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from rollcli.backends.verl import runner
from rollcli.errors import RAY_SLOW_START

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray")


class FlakyStart:
    """A stand-in for ``ray.init``: fails with ``errors`` in turn, then succeeds."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


@pytest.fixture
def shutdowns(monkeypatch):
    import ray

    calls: list[str] = []
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(runner, "_stop_stranded_ray_processes", lambda: calls.append("stop"))
    return calls


def test_a_slow_local_start_starts_again(shutdowns, capsys):
    start = FlakyStart(Exception(RAY_SLOW_START + ". This could happen because ..."))
    runner.retrying_slow_ray_start(start)
    assert start.calls == 2
    assert shutdowns == ["shutdown", "stop"]
    assert "starting it again (2 of 3)" in capsys.readouterr().out


def test_three_slow_starts_fail_with_rays_error(shutdowns):
    start = FlakyStart(*(Exception(RAY_SLOW_START) for _ in range(3)))
    with pytest.raises(Exception, match=RAY_SLOW_START):
        runner.retrying_slow_ray_start(start)
    assert start.calls == 3


def test_any_other_error_goes_through_at_once(shutdowns):
    start = FlakyStart(ValueError("a bad override"))
    with pytest.raises(ValueError, match="bad override"):
        runner.retrying_slow_ray_start(start)
    assert start.calls == 1 and shutdowns == []


def test_an_error_once_ray_was_up_is_not_a_start(monkeypatch, shutdowns):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # the task runner failed, say
    start = FlakyStart(Exception(RAY_SLOW_START))
    with pytest.raises(Exception, match=RAY_SLOW_START):
        runner.retrying_slow_ray_start(start)
    assert start.calls == 1


def test_stranded_ray_children_are_stopped_and_nothing_else():
    sleep = [sys.executable, "-c", "import sys, time; time.sleep(120)"]
    ray_like = subprocess.Popen([*sleep, "ray/core/src/ray/raylet/raylet"])
    other = subprocess.Popen([*sleep, "not-this-one"])
    try:
        runner._stop_stranded_ray_processes()
        assert ray_like.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for proc in (ray_like, other):
            proc.kill()
            proc.wait()
