"""Templates shipped inside the package: spec bases and starting points, sbatch script pieces.

``specs/`` holds the bases of ``extends:`` (``base.yaml``) and the templates of ``rollcli init``;
``sbatch/`` the pieces of the scripts the Slurm executor renders. They are package data, found
with :mod:`importlib.resources`, so a wheel installed anywhere carries them (a test builds one).
``$ROLLCLI_TEMPLATES`` points the spec templates at another folder.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

__all__ = ["TEMPLATES_ENV", "read_sbatch_template", "spec_templates_dir"]

TEMPLATES_ENV = "ROLLCLI_TEMPLATES"


def _package_dir(name: str) -> Path:
    # an installed package is a folder on disk (wheels are never imported zipped), so its
    # resources are plain files whose paths error messages can name
    return Path(str(resources.files(__name__).joinpath(name)))


def spec_templates_dir() -> Path:
    """``$ROLLCLI_TEMPLATES`` or the package's ``specs/`` folder."""
    env = os.environ.get(TEMPLATES_ENV)
    return Path(env) if env else _package_dir("specs")


def read_sbatch_template(name: str) -> str:
    """The text of ``sbatch/<name>``; a clear error when the installation lacks it."""
    ref = resources.files(__name__).joinpath("sbatch", name)
    if not ref.is_file():
        raise FileNotFoundError(f"{ref}: sbatch template missing from this rollcli installation")
    return ref.read_text("utf-8")
