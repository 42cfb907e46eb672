"""Data files shipped with rollcli (benchmarks, a training set); see PROVENANCE.md."""
