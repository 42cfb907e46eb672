"""The report's LaTeX table and figure drop into a two-column paper unedited (issue 28): compiled
with pdflatex where a TeX engine is installed (``apt-get install texlive-latex-base
texlive-latex-recommended``), the test skips otherwise; no overfull box may be reported."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from rollcli.analysis.report import write_report

PAPER = r"""\documentclass[twocolumn]{article}
\usepackage[margin=0.75in]{geometry}
\usepackage{booktabs}
\usepackage{graphicx}
\begin{document}
\section{Results}
Some text in the first column.
\input{report.tex}
%FIGURE%
\input{report-wide.tex}
\end{document}
"""


@pytest.mark.parametrize("seeds", [(0, 1, 2), (0, 1, 2, 3, 4, 5)], ids=["per-seed", "interval"])
def test_the_report_compiles_in_a_two_column_paper(make_run, tmp_path, seeds):
    engine = shutil.which("pdflatex")
    if engine is None:
        pytest.skip("no TeX engine (pdflatex) installed")
    run = make_run(tmp_path / "runs" / "paper", seeds=seeds)
    result = write_report(run, formats="latex", plots=True)
    out = run / "report"
    figures = [p.name for p in result.files if p.suffix == ".pdf" and p.stem == "accuracy"]
    figure = (
        "\\begin{figure}[t]\\centering\\includegraphics[width=\\columnwidth]{"
        + figures[0]
        + "}\\caption{Accuracy.}\\end{figure}"
        if figures
        else ""
    )
    (out / "paper.tex").write_text(PAPER.replace("%FIGURE%", figure))
    done = subprocess.run(
        [engine, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (out / "paper.log").read_text(errors="replace")
    assert done.returncode == 0, log[-3000:]
    assert not re.search(r"Overfull \\hbox", log), re.findall(r"Overfull \\hbox.*", log)
    assert (out / "paper.pdf").stat().st_size > 1000
