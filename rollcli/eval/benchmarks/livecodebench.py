"""LiveCodeBench loader for the official ``code_generation_lite`` release files.

Each JSONL record has ``question_id, question_title, question_content, platform, contest_date,
starter_code, difficulty, public_test_cases`` (a JSON string), ``private_test_cases`` (a JSON
string in old releases; base64 -> zlib -> pickle -> JSON string in current ones) and ``metadata``
(a JSON string; ``func_name`` marks LeetCode-style functional problems).

Private tests are decoded with :class:`RestrictedUnpickler`, which resolves no global except a
few builtin containers: a pickle that tries to import anything (``os.system``, ``eval``) raises
:class:`UnsafePickleError` instead of running. Decompression is capped so a zlib bomb cannot
exhaust memory. Release files come from a local path (a file or the folder holding
``test.jsonl ... test6.jsonl``) or, when ``huggingface_hub`` is importable and the hub is
reachable, from the ``livecodebench/code_generation_lite`` dataset repository.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from pathlib import Path
from typing import Any

from rollcli.eval.benchmarks.base import BenchmarkError, CodeTest, Problem

__all__ = [
    "RestrictedUnpickler",
    "UnsafePickleError",
    "decode_private_tests",
    "load_livecodebench",
    "release_files",
]

HF_REPO = "livecodebench/code_generation_lite"
MAX_DECOMPRESSED = 1 << 30  # 1 GiB of test data per problem is far beyond any real record
_FILES = ["test.jsonl"] + [f"test{i}.jsonl" for i in range(2, 7)]
_ALLOWED_GLOBALS = {
    ("builtins", name)
    for name in (
        "str",
        "bytes",
        "list",
        "dict",
        "tuple",
        "set",
        "frozenset",
        "int",
        "float",
        "bool",
    )
} | {("__builtin__", name) for name in ("unicode", "str", "list", "dict", "tuple", "set")}


class UnsafePickleError(BenchmarkError):
    """A pickle that references something other than builtin containers and strings."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only builtin container/str types; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise UnsafePickleError(f"refusing to unpickle global {module}.{name}")


def _restricted_loads(data: bytes) -> Any:
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as error:  # noqa: BLE001 - any malformed pickle is a bad record
        raise BenchmarkError(f"private tests: malformed pickle ({error})") from error


def _capped_decompress(data: bytes) -> bytes:
    decompressor = zlib.decompressobj()
    out = decompressor.decompress(data, MAX_DECOMPRESSED)
    if decompressor.unconsumed_tail:
        raise BenchmarkError(f"private tests decompress to more than {MAX_DECOMPRESSED} bytes")
    return out


def decode_private_tests(raw: str) -> list[dict[str, Any]]:
    """Decode a ``private_test_cases`` field: plain JSON, or base64 -> zlib -> pickle -> JSON."""
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        try:
            compressed = base64.b64decode(raw.encode("ascii"), validate=False)
            payload = _capped_decompress(compressed)
        except (ValueError, zlib.error) as error:
            raise BenchmarkError(f"private tests: not JSON nor base64+zlib ({error})") from error
        text = _restricted_loads(payload)
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise UnsafePickleError(
                f"private tests unpickled to {type(text).__name__}, not str"
            ) from None
        value = json.loads(text)
    if not isinstance(value, list):
        raise BenchmarkError("private tests: expected a JSON list")
    return value


def _tests(items: list[dict[str, Any]]) -> list[CodeTest]:
    tests = []
    for item in items:
        testtype = item.get("testtype", "stdin")
        if testtype not in ("stdin", "functional"):
            raise BenchmarkError(f"unknown LiveCodeBench testtype {testtype!r}")
        tests.append(CodeTest(input=item["input"], output=item["output"], testtype=testtype))
    return tests


def _problem(row: dict[str, Any]) -> Problem:
    public = row.get("public_test_cases") or "[]"
    public_items = json.loads(public) if isinstance(public, str) else public
    private_items = decode_private_tests(row.get("private_test_cases") or "")
    meta_raw = row.get("metadata") or "{}"
    meta = json.loads(meta_raw) if isinstance(meta_raw, str) else dict(meta_raw)
    tests = _tests(public_items) + _tests(private_items)
    if not tests:
        raise BenchmarkError(f"LiveCodeBench problem {row.get('question_id')} has no tests")
    return Problem(
        id=f"livecodebench/{row['question_id']}",
        question=row["question_content"],
        kind="code",
        tests=tuple(tests),
        starter_code=row.get("starter_code") or "",
        func_name=meta.get("func_name"),
        metadata={
            "title": row.get("question_title", ""),
            "platform": row.get("platform", ""),
            "contest_date": str(row.get("contest_date", "")),
            "difficulty": row.get("difficulty", ""),
            "num_public_tests": len(public_items),
        },
    )


def release_files(version: str) -> list[str]:
    """File names making up a release tag: ``release_vN`` (cumulative), ``vN``, ``vN_vM``."""
    if version == "release_latest":
        return list(_FILES)
    if version.startswith("release_v") and version[9:].isdigit():
        n = int(version[9:])
        if 1 <= n <= len(_FILES):
            return _FILES[:n]
    parts = version.split("_")
    if all(p.startswith("v") and p[1:].isdigit() for p in parts) and len(parts) in (1, 2):
        lo, hi = int(parts[0][1:]), int(parts[-1][1:])
        if 1 <= lo <= hi <= len(_FILES):
            return _FILES[lo - 1 : hi]
    raise BenchmarkError(
        f"unknown LiveCodeBench version {version!r}; use release_v1..release_v6, release_latest, "
        "v1..v6 or vN_vM (v6 = the 175 problems added in release_v6)"
    )


def _hub_files(names: list[str]) -> list[Path]:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as error:
        raise BenchmarkError(
            "livecodebench needs a local path (--lcb-path / eval.livecodebench.path): "
            "huggingface_hub is not installed to fetch it from the hub"
        ) from error
    try:
        return [Path(hf_hub_download(HF_REPO, n, repo_type="dataset")) for n in names]
    except Exception as error:  # noqa: BLE001 - offline, gated, renamed: all say the same
        raise BenchmarkError(
            f"could not fetch {HF_REPO} from the HF hub ({type(error).__name__}); download "
            "the release jsonl files and pass their folder as the livecodebench path"
        ) from error


def load_livecodebench(
    path: str | Path | None = None,
    *,
    version: str = "v6",
    start_date: str | None = None,
    end_date: str | None = None,
) -> list[Problem]:
    """Problems from a release file or folder (or the hub when ``path`` is None).

    ``start_date``/``end_date`` (ISO ``YYYY-MM-DD``, inclusive) filter on ``contest_date``.
    """
    names = release_files(version)
    if path is None:
        files = _hub_files(names)
    else:
        path = Path(path)
        if path.is_file():
            files = [path]
        elif path.is_dir():
            files = [path / n for n in names if (path / n).is_file()]
            if not files:
                raise BenchmarkError(f"no {' / '.join(names)} in {path} (LiveCodeBench {version})")
        else:
            raise BenchmarkError(f"LiveCodeBench path {path} does not exist")
    problems = []
    for file in files:
        for line_no, line in enumerate(file.read_text("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            date = str(row.get("contest_date", ""))[:10]
            if (start_date and date < start_date) or (end_date and date > end_date):
                continue
            try:
                problems.append(_problem(row))
            except UnsafePickleError as error:
                raise UnsafePickleError(f"{file}:{line_no}: {error}") from error
    return problems
