"""Tests of the generic train loop (rollcli.train)."""
