"""Helpers for an allocator's ``_state()``: what it keeps, as plain JSON data and back.

An allocator's state must survive ``json.loads(json.dumps(state))`` at any point between two
protocol calls and continue exactly as if nothing happened (the contract suite checks it). So
everything it holds goes through these pairs:

* :func:`outcome_to_json` / :func:`outcome_from_json`, :func:`group_to_json` /
  :func:`group_from_json` -- told outcomes and built groups (rewards exact, refs as they are);
* :func:`array_to_json` / :func:`array_from_json` -- a numpy array with its dtype and shape,
  bit-exact for floats (``nan`` and infinities included, which plain JSON cannot hold);
* :func:`prompt_dict_to_json` / :func:`prompt_dict_from_json` -- a per-prompt dictionary
  (JSON object keys are strings; these keep int ids, and the insertion order, which a
  tie-break may depend on);
* :class:`PromptHistory` -- the last ``maxlen`` values per prompt (GRESO's trace of group
  means, Knapsack's recent rewards), with its own ``state_dict``.

Pure Python + numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rollcli.allocators.api import Group, Outcome

__all__ = [
    "PromptHistory",
    "array_from_json",
    "array_to_json",
    "group_from_json",
    "group_to_json",
    "outcome_from_json",
    "outcome_to_json",
    "prompt_dict_from_json",
    "prompt_dict_to_json",
]

_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def outcome_to_json(o: Outcome) -> list[Any]:
    """``[prompt_id, phase, rewards, num_tokens, policy_version, refs]`` as plain lists."""
    return [
        o.prompt_id,
        o.phase,
        o.rewards.tolist(),
        o.num_tokens.tolist(),
        o.policy_version,
        list(o.refs),
    ]


def outcome_from_json(s: Sequence[Any]) -> Outcome:
    prompt, phase, rewards, tokens, version, refs = s
    return Outcome(
        int(prompt),
        str(phase),
        np.asarray(rewards, dtype=float),
        np.asarray(tokens, dtype=np.int64),
        int(version),
        tuple(refs),
    )


def outcomes_to_json(outcomes: Iterable[Outcome]) -> list[list[Any]]:
    """A list of outcomes as JSON data (a prompt's rollouts gathered over several asks)."""
    return [outcome_to_json(o) for o in outcomes]


def outcomes_from_json(items: Iterable[Sequence[Any]]) -> list[Outcome]:
    """The outcomes :func:`outcomes_to_json` wrote."""
    return [outcome_from_json(o) for o in items]


def group_to_json(g: Group) -> list[Any]:
    """``[prompt_id, refs, rewards]``, plus the baseline when the group carries one."""
    out = [g.prompt_id, list(g.refs), g.rewards.tolist()]
    if g.baseline is not None:
        out.append(g.baseline)
    return out


def group_from_json(s: Sequence[Any]) -> Group:
    prompt, refs, rewards, *rest = s
    baseline = float(rest[0]) if rest and rest[0] is not None else None
    return Group(int(prompt), tuple(refs), np.asarray(rewards, dtype=float), baseline)


def array_to_json(a: np.ndarray) -> dict[str, Any]:
    """``{"dtype", "shape", "data"}``; floats exactly (``nan``/``inf`` as strings), any shape."""
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"array_to_json: only bool, int and float arrays, got dtype {a.dtype}")
    flat = a.ravel()
    data: list[Any] = flat.tolist()
    if a.dtype.kind == "f" and not np.isfinite(flat).all():
        data = [x if math.isfinite(x) else str(x) for x in data]
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": data}


def array_from_json(d: Mapping[str, Any]) -> np.ndarray:
    """The array :func:`array_to_json` wrote (same dtype, shape and values)."""
    dtype = np.dtype(d["dtype"])
    data = d["data"]
    if dtype.kind == "f":
        data = [_NON_FINITE[x] if isinstance(x, str) else x for x in data]
    return np.asarray(data, dtype=dtype).reshape(d["shape"])


def prompt_dict_to_json(
    d: Mapping[int, Any], value: Callable[[Any], Any] | None = None
) -> list[list[Any]]:
    """``[[prompt_id, value], ...]`` in the dictionary's order; ``value`` converts each value
    to JSON data (e.g. :func:`array_to_json`, ``outcome_to_json``); plain data goes as it is."""
    if value is None:
        return [[int(p), v] for p, v in d.items()]
    return [[int(p), value(v)] for p, v in d.items()]


def prompt_dict_from_json(
    items: Iterable[Sequence[Any]], value: Callable[[Any], Any] | None = None
) -> dict[int, Any]:
    """The dictionary :func:`prompt_dict_to_json` wrote (int keys, same order); ``value``
    converts each value back (e.g. :func:`array_from_json`, ``float``)."""
    if value is None:
        return {int(p): v for p, v in items}
    return {int(p): value(v) for p, v in items}


class PromptHistory:
    """The most recent values seen per prompt, at most ``maxlen`` each (``None``: all of them).

    ``extend(prompt_id, values)`` appends, oldest first; ``get(prompt_id)`` returns the kept
    values oldest first (an empty tuple for a prompt never seen); ``count(prompt_id)`` is how
    many values were ever added, kept or not. Prompts keep the order they were first seen in.
    """

    def __init__(self, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen < 1:
            raise ValueError(f"PromptHistory: maxlen must be >= 1 or None, got {maxlen}")
        self.maxlen = maxlen
        self._values: dict[int, list[float]] = {}
        self._counts: dict[int, int] = {}

    def __contains__(self, prompt_id: object) -> bool:
        return prompt_id in self._values

    def __len__(self) -> int:
        return len(self._values)

    def prompts(self) -> list[int]:
        return list(self._values)

    def extend(self, prompt_id: int, values: Iterable[float]) -> None:
        new = [float(v) for v in values]
        kept = self._values.setdefault(int(prompt_id), [])
        kept.extend(new)
        if self.maxlen is not None and len(kept) > self.maxlen:
            del kept[: len(kept) - self.maxlen]
        self._counts[int(prompt_id)] = self._counts.get(int(prompt_id), 0) + len(new)

    def append(self, prompt_id: int, value: float) -> None:
        self.extend(prompt_id, (value,))

    def get(self, prompt_id: int) -> tuple[float, ...]:
        return tuple(self._values.get(int(prompt_id), ()))

    def count(self, prompt_id: int) -> int:
        return self._counts.get(int(prompt_id), 0)

    def state_dict(self) -> dict[str, Any]:
        return {
            "maxlen": self.maxlen,
            "values": prompt_dict_to_json(self._values, list),
            "counts": prompt_dict_to_json(self._counts),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["maxlen"] != self.maxlen:
            raise ValueError(
                f"PromptHistory: state has maxlen {state['maxlen']}, this one {self.maxlen}"
            )
        self._values = prompt_dict_from_json(state["values"], lambda v: [float(x) for x in v])
        self._counts = prompt_dict_from_json(state["counts"], int)
