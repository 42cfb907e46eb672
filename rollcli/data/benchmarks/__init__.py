"""Math benchmark files (JSONL) shipped with rollcli; loaded by rollcli.eval.benchmarks."""
