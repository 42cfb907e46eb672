"""Spec templates: the bases of ``extends:`` and the starting points of ``rollcli init``.

They ship in the package (``rollcli/templates/specs``, :mod:`rollcli.templates`);
``$ROLLCLI_TEMPLATES`` points at another folder.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["template_names", "templates_dir"]


def templates_dir() -> Path:
    """``$ROLLCLI_TEMPLATES`` or the package's ``rollcli/templates/specs``."""
    from rollcli.templates import spec_templates_dir

    return spec_templates_dir()


def template_names(*, complete: bool = False) -> list[str]:
    """Template names; with ``complete``, only full specs (a ``name:``), not partial bases."""
    root = templates_dir()
    if not root.is_dir():
        return []
    paths = sorted(root.glob("*.yaml"))
    if complete:
        paths = [p for p in paths if re.search(r"(?m)^name:", p.read_text("utf-8"))]
    return [p.stem for p in paths]
