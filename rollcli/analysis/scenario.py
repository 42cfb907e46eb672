"""The name under which a suite's points carry their scenario (a pseudo-axis of the sweep).

Its own module so that the sweep file parser (:mod:`rollcli.sweep.file`) and the robustness
table (:mod:`rollcli.analysis.robustness`) share it without the parser loading numpy.
"""

SCENARIO_KEY = "scenario"
