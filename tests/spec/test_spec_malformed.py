"""The malformed-spec corpus: every file fails with file:line:column, the field, exit code 2, and
nothing created. Each file's first line states what is expected::

    # expect: LINE:COL FIELD.PATH | SUBSTRING OF THE MESSAGE
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rollcli.errors import SpecError
from rollcli.spec import load_spec

CORPUS = sorted((Path(__file__).parent / "malformed").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\d+):(\d+)\s*(\S*(?: v2)?)\s*\|\s*(.+)$")


def _expectation(path: Path) -> tuple[int, int, str, str]:
    first = path.read_text("utf-8").splitlines()[0]
    match = EXPECT.match(first)
    assert match, f"{path.name}: first line must be '# expect: L:C field | text'"
    return int(match[1]), int(match[2]), match[3], match[4].strip()


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_malformed_spec(path: Path, cli, tmp_path: Path):
    line, column, field, text = _expectation(path)
    rel = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    with pytest.raises(SpecError) as caught:
        load_spec(rel)
    message = str(caught.value)
    assert message.startswith(f"{rel}:{line}:{column}: "), message
    if field:
        assert f": {field}: " in message, message
    assert text in message, message
    assert "\n" not in message

    runs = tmp_path / "runs"
    for command in (["validate", rel], ["run", rel, "--runs-dir", runs]):
        result = cli(command)
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr.startswith(f"error: {rel}:{line}:{column}: "), result.stderr
        assert "Traceback" not in result.output
    assert not runs.exists(), "a bad spec must not create anything"
