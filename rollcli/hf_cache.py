"""The Hugging Face cache of a run: which hub models a spec needs, whether they are cached, and
filling the cache on a node with internet so compute nodes without it run offline.

Specs name hub model ids (``Qwen/Qwen2.5-Math-1.5B``); compute nodes of many clusters have no
internet. ``rollcli data prefetch SPEC`` (:func:`prefetch`) downloads each model's weights,
config and tokenizer into the cache named by ``HF_HUB_CACHE`` / ``HF_HOME`` (put it on a shared
file system), and Slurm jobs then run with ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``
(:func:`offline_environment`), so a missing model fails at once instead of hanging on a
download. Setting ``HF_HUB_OFFLINE=0`` yourself keeps jobs online. huggingface_hub is imported
only inside the functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "OFFLINE_VARIABLES",
    "hub_cache_dir",
    "hub_models",
    "missing_models",
    "offline_environment",
    "offline_wanted",
    "prefetch",
]

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
# what a training or eval job reads: weights, configs, tokenizer and chat template files
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "*.py", "*.jinja"]
_NOT_HUB = ("tiny",)  # rollcli's built-in test model


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache the jobs will read: ``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub`` (huggingface_hub's own order)."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def _is_hub_id(name: str) -> bool:
    if not name or name in _NOT_HUB or os.path.exists(name):
        return False
    if name.startswith(("/", "./", "../", "~")):
        return False  # a local folder that does not exist (the job reports it)
    return name.count("/") <= 1


def hub_models(backend: Mapping[str, Any]) -> list[str]:
    """The hub repos a backend section downloads (model and tokenizer), in order, once each;
    local folders and ``tiny`` are not hub repos."""
    names = [str(backend.get("model") or ""), str(backend.get("tokenizer") or "")]
    return [n for n in dict.fromkeys(names) if _is_hub_id(n)]


def _cached(repo_id: str, cache: Path) -> bool:
    from huggingface_hub import try_to_load_from_cache

    for filename in ("config.json", "tokenizer_config.json"):
        found = try_to_load_from_cache(repo_id, filename, cache_dir=cache)
        if isinstance(found, str):
            return True
    return False


def missing_models(repos: Iterable[str], cache: Path | None = None) -> list[str]:
    """The repos of ``repos`` that have no snapshot (config or tokenizer config) in ``cache``."""
    cache = hub_cache_dir() if cache is None else cache
    return [repo for repo in repos if not _cached(repo, cache)]


def prefetch(
    repos: Iterable[str],
    cache: Path | None = None,
    *,
    download: Callable[..., str] | None = None,
) -> list[tuple[str, Path]]:
    """Download each repo's weights, config and tokenizer into ``cache``; returns ``(repo,
    snapshot folder)``. ``download`` defaults to ``huggingface_hub.snapshot_download``."""
    if download is None:
        from huggingface_hub import snapshot_download as download
    cache = hub_cache_dir() if cache is None else cache
    cache.mkdir(parents=True, exist_ok=True)
    done = []
    for repo in repos:
        folder = download(repo, cache_dir=str(cache), allow_patterns=ALLOW_PATTERNS)
        done.append((repo, Path(folder)))
    return done


def offline_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Jobs on compute nodes run offline unless the user set ``HF_HUB_OFFLINE=0``."""
    env = os.environ if env is None else env
    return env.get("HF_HUB_OFFLINE", "1").strip().lower() not in ("0", "false", "no")


def offline_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a compute-node job sets: every offline switch ``1`` (none that the user
    set is overridden; nothing when the user asked for online with ``HF_HUB_OFFLINE=0``)."""
    env = os.environ if env is None else env
    if not offline_wanted(env):
        return {}
    return {name: "1" for name in OFFLINE_VARIABLES if name not in env}
