"""Tests of rollcli.allocators (contract suite, hand-computed cases, properties)."""
