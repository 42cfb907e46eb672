"""Benchmark registry, shipped math sets and their gold normalisation, LCB loader, prompts."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from rollcli.eval.benchmarks import (
    BENCHMARKS,
    BenchmarkError,
    Problem,
    UnsafePickleError,
    decode_private_tests,
    last_boxed,
    load_benchmark,
    load_livecodebench,
    parse_suite,
    render_prompt,
)

SIZES = {
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "math500": 500,
    "minerva_math": 272,
    "olympiadbench": 675,
    "gsm8k": 1319,
}


def test_registry_names():
    assert set(BENCHMARKS) == set(SIZES) | {"livecodebench", "humaneval"}
    with pytest.raises(BenchmarkError, match="valid:.*math500"):
        parse_suite("aime24,mmlu")
    assert parse_suite(" aime24, math500 ") == ["aime24", "math500"]


@pytest.mark.parametrize("name", sorted(SIZES))
def test_math_sets_load_with_string_golds(name):
    problems = load_benchmark(name)
    assert len(problems) == SIZES[name]
    assert len({p.id for p in problems}) == len(problems)
    assert all(isinstance(p.answer, str) and p.answer for p in problems)
    assert all(p.kind == "math" and p.question for p in problems)


def test_gold_normalisation_per_set():
    assert load_benchmark("amc23")[0].answer == "27"  # float 27.0 in the file
    assert load_benchmark("aime25")[0].answer == "70"  # int in the file
    assert load_benchmark("gsm8k")[0].answer == "18"  # after ####
    minerva = load_benchmark("minerva_math")[0]
    assert minerva.answer == "1.6"  # last box of the solution
    olympiad = load_benchmark("olympiadbench", limit=3)
    assert olympiad[0].answer == "2" and "$" not in "".join(p.answer for p in olympiad)
    assert len(load_benchmark("math500", limit=7)) == 7


def test_last_boxed():
    assert last_boxed("a \\boxed{\\frac{1}{2}} b \\boxed{x^{2}}") == "x^{2}"
    assert last_boxed("\\boxed 5.") == "5"
    assert last_boxed("\\fbox{3}") == "3"
    assert last_boxed("\\boxed{unclosed") is None
    assert last_boxed("nothing") is None


def test_lcb_fixture_loads_public_and_private_tests(lcb_dir: Path):
    problems = load_livecodebench(lcb_dir, version="v6")
    by_id = {p.id: p for p in problems}
    assert set(by_id) == {f"livecodebench/{q}" for q in ("abc001_a", "abc001_b", "3001", "3002")}
    stdin = by_id["livecodebench/abc001_a"]
    assert len(stdin.tests) == 5 and stdin.metadata["num_public_tests"] == 2
    assert stdin.tests[3].output == "1111111110\n"  # a private (pickled) test
    assert stdin.func_name is None and all(t.testtype == "stdin" for t in stdin.tests)
    plain = by_id["livecodebench/abc001_b"]  # private tests stored as plain JSON
    assert len(plain.tests) == 3
    functional = by_id["livecodebench/3001"]
    assert functional.func_name == "addTwo"
    assert functional.tests[0].testtype == "functional" and functional.tests[0].input == "3\n4"
    assert "class Solution" in functional.starter_code
    assert len(load_livecodebench(lcb_dir, start_date="2025-04-01")) == 2


def test_malicious_pickle_is_refused(lcb_dir: Path):
    marker = Path("/tmp/rollcli-lcb-pwned")
    marker.unlink(missing_ok=True)
    with pytest.raises(UnsafePickleError, match="system"):
        load_livecodebench(lcb_dir / "malicious.jsonl")
    assert not marker.exists()


def test_decode_private_tests_rejects_non_strings():
    payload = base64.b64encode(zlib.compress(pickle.dumps(b"not-json-bytes-but-bytes"))).decode()
    with pytest.raises(Exception):  # noqa: B017 - bytes decode then JSON error
        decode_private_tests(payload)
    as_int = base64.b64encode(zlib.compress(pickle.dumps(12))).decode()
    with pytest.raises(UnsafePickleError):
        decode_private_tests(as_int)
    ok = base64.b64encode(zlib.compress(pickle.dumps(json.dumps([{"input": "1", "output": "2"}]))))
    assert decode_private_tests(ok.decode()) == [{"input": "1", "output": "2"}]


def test_lcb_missing_path_and_bad_version(tmp_path: Path):
    with pytest.raises(BenchmarkError, match="does not exist"):
        load_livecodebench(tmp_path / "nope")
    with pytest.raises(BenchmarkError, match="unknown LiveCodeBench version"):
        load_livecodebench(tmp_path, version="v9")


class _Tokenizer:
    chat_template = "x"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"


def test_prompts_math_and_code():
    math = Problem("m/1", "What is 1+1?", "math", answer="2")
    text = render_prompt(math)
    assert text.startswith("What is 1+1?") and "\\boxed{}" in text
    templated = render_prompt(math, _Tokenizer())
    assert templated.startswith("user:What is 1+1?") and templated.endswith("|assistant:")
    code = Problem("c/1", "Add.", "code", starter_code="class Solution:\n    def f(self):")
    text = render_prompt(code, _Tokenizer())
    assert text.startswith("system:") and "class Solution" in text and "```python" in text
    stdin = render_prompt(Problem("c/2", "Read.", "code"))
    assert "stdin" in stdin and "# YOUR CODE HERE" in stdin
