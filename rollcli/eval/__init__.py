"""Evaluation: benchmarks (registry + loaders), engines (vLLM, transformers, tiny), graders
(math-verify in a killable pool, a code sandbox), metrics (avg@k, pass@k) and the resumable
runner behind ``rollcli eval``. See docs/eval.md.

Submodules are imported on demand (``rollcli.eval.runner``, ``rollcli.eval.benchmarks``...): this
package imports nothing heavy.
"""
