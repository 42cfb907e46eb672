"""Prompt templates per benchmark kind, rendered through a tokenizer's chat template.

Math (the Qwen2.5-Math / DeepScaleR convention): the question, then "reason step by step and
put the final answer within \\boxed{}" -- graders read the last box. Code (LiveCodeBench's own
wording): a system line, the question, and a format section asking for exactly one fenced Python
block, either completing the given starter code (functional problems) or reading stdin and
writing stdout. When the tokenizer has a chat template the messages go through it with the
generation prompt appended; otherwise the plain text is used (base models, the tiny backend).
"""

from __future__ import annotations

from typing import Any

from rollcli.eval.benchmarks.base import Problem

__all__ = ["MATH_INSTRUCTION", "CODE_SYSTEM", "messages_for", "render_prompt"]

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CODE_SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) "
    "and will generate a correct Python program that matches the specification and passes all "
    "tests."
)
_CODE_STARTER = (
    "### Format: You will use the following starter code to write the solution to the problem "
    "and enclose your code within delimiters.\n```python\n{starter}\n```\n\n"
    "### Answer: (use the provided format with backticks)\n\n"
)
_CODE_STDIN = (
    "### Format: Read the inputs from stdin solve the problem and write the answer to stdout "
    "(do not directly test on the sample inputs). Enclose your code within delimiters as "
    "follows. Ensure that when the python program runs, it reads the inputs, runs the algorithm "
    "and writes output to STDOUT.\n```python\n# YOUR CODE HERE\n```\n\n"
    "### Answer: (use the provided format with backticks)\n\n"
)


def messages_for(problem: Problem) -> list[dict[str, str]]:
    """Chat messages for one problem (system message only for code)."""
    if problem.kind == "math":
        return [{"role": "user", "content": f"{problem.question}\n{MATH_INSTRUCTION}"}]
    fmt = (
        _CODE_STARTER.format(starter=problem.starter_code.rstrip())
        if problem.starter_code.strip()
        else _CODE_STDIN
    )
    user = f"### Question:\n{problem.question}\n\n{fmt}"
    return [{"role": "system", "content": CODE_SYSTEM}, {"role": "user", "content": user}]


def render_prompt(problem: Problem, tokenizer: Any | None = None) -> str:
    """The prompt string: through ``tokenizer.apply_chat_template`` when it has a chat template."""
    messages = messages_for(problem)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages) + "\n"
