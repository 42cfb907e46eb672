"""One style for every figure rollcli writes (report, breakdown, sweep): sizes that drop into a
paper, human tick labels, and the files: PDF for the paper, PNG at 200 dpi for terminals and
READMEs. Imported only when plotting (matplotlib is heavy).

- :func:`new_figure` — a figure in the house style (``column``: one column of a two-column
  paper, 3.4 in wide; else the full text width, 7 in);
- :func:`count_axis` — tick labels as counts (``10k``, ``1.5M``), never ``1e4`` offset notation;
- :func:`save_figure` — ``<stem>.pdf`` and ``<stem>.png``, atomically, no timestamps inside (the
  same run gives the same bytes).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_bytes
from rollcli.text import fmt_count

__all__ = [
    "COLUMN_WIDTH_IN",
    "TEXT_WIDTH_IN",
    "PNG_DPI",
    "FORMATS",
    "STYLE",
    "new_figure",
    "count_axis",
    "plain_axis",
    "save_figure",
    "color",
]

COLUMN_WIDTH_IN = 3.4  # one column of a two-column paper (ICML/NeurIPS/ACL: 3.25-3.5 in)
TEXT_WIDTH_IN = 7.0
PNG_DPI = 200
FORMATS = ("pdf", "png")

STYLE: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.4,
    "axes.formatter.useoffset": False,
    "pdf.fonttype": 42,  # TrueType in the PDF: editable text, accepted by every venue
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
}
_PALETTE = "tab10"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    # set for the process: artists read rcParams when they are made (titles, legends, labels),
    # long after the figure; only processes that plot ever import this module
    matplotlib.rcParams.update(STYLE)
    return plt


def color(index: int) -> Any:
    """The colour of the ``index``-th series (one allocator keeps one colour in every figure)."""
    return _pyplot().get_cmap(_PALETTE)(index % 10)


def new_figure(ncols: int = 1, *, column: bool = True, height: float = 2.4, **kwargs: Any):
    """``(fig, axes)`` in the house style; ``axes`` is a flat list of ``ncols`` axes."""
    plt = _pyplot()
    width = COLUMN_WIDTH_IN if column else TEXT_WIDTH_IN
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False, **kwargs)
    return fig, list(axes[0])


def count_axis(ax: Any, which: str = "x") -> None:
    """Tick labels as human counts (``10k``) on ``which`` (x, y or both)."""
    from matplotlib.ticker import FuncFormatter

    formatter = FuncFormatter(lambda value, _: fmt_count(value) if value else "0")
    for name in ("x", "y") if which == "both" else (which,):
        getattr(ax, f"{name}axis").set_major_formatter(formatter)


def plain_axis(ax: Any, which: str = "y") -> None:
    """No offset or scientific notation on a fraction/ratio axis."""
    ax.ticklabel_format(axis=which, style="plain", useOffset=False)


def save_figure(fig: Any, out_dir: str | Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``<stem>.pdf`` and ``<stem>.png`` (200 dpi), atomically; returns paths."""
    out_dir = Path(out_dir)
    paths = []
    for ext in FORMATS:
        buf = io.BytesIO()
        # no timestamps in the files: the same run gives the same plot bytes
        metadata = {"CreationDate": None, "Producer": None} if ext == "pdf" else {"Software": None}
        fig.savefig(buf, format=ext, dpi=PNG_DPI, metadata=metadata)
        path = out_dir / f"{stem}.{ext}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths
