"""Evaluation: benchmarks (registry + loaders), engines (vLLM, transformers, tiny), graders
(math-verify in a killable pool, a code sandbox), metrics (avg@k, pass@k) and the resumable
runner behind ``rollcli eval``. See docs/eval.md.

Submodules are imported on demand (``rollcli.eval.runner``, ``rollcli.eval.benchmarks``...): this
package imports nothing heavy. The eval *jobs* of a plan evaluate verl checkpoints, so they live
with the verl backend (``rollcli.backends.verl.eval_job``) and use this package.
"""
