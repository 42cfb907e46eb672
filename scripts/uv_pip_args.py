"""Print pip's effective index, find-links and constraint settings as ``uv pip install`` arguments.

uv reads neither pip's configuration files nor its PIP_* variables, so scripts/test.sh hands
them over: on a machine whose pip config points at a local torch CPU wheel (find-links) and an
on-disk package mirror (extra indexes), uv then installs what pip would. One argument a line.
``--index-strategy unsafe-best-match`` makes uv compare versions across all of them, as pip
does (uv's default takes every version of a package from the first index that has it).
"""

from __future__ import annotations

import shlex
import subprocess
import sys

# pip setting -> uv flag; each setting may hold several whitespace-separated values
FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """The values of FLAGS' settings in ``pip config list`` output, the last scope listed
    winning (pip lists its environment variables last, and they override its files)."""
    found: dict[str, list[str]] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        key = name.rsplit(".", 1)[-1]
        if not sep or key not in FLAGS:
            continue
        found[key] = shlex.split(raw)[0].split() if raw.strip() else []
    return found


def uv_args(settings: dict[str, list[str]]) -> list[str]:
    """``uv pip install`` arguments that select the same packages as ``settings``."""
    args = ["--index-strategy", "unsafe-best-match"]
    for key, flag in FLAGS.items():
        for value in settings.get(key, []):
            args += [flag, value]
    return args


def main() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print("\n".join(uv_args(pip_settings(listing))))


if __name__ == "__main__":
    main()
