"""``rollcli eval``'s vLLM options: a dtype vLLM does not take is refused before any model loads."""

from __future__ import annotations


def test_bad_vllm_dtype_is_refused(cli, tmp_path):
    result = cli(
        [
            "eval",
            "--model",
            str(tmp_path / "no-model"),
            "--engine",
            "vllm",
            "--dtype",
            "fp8",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert result.exit_code != 0
    assert "--dtype 'fp8'" in result.output and "float32" in result.output
    assert not (tmp_path / "out").exists()  # nothing started


def test_vllm_options_in_help(cli):
    result = cli(["eval", "--help"])
    assert result.exit_code == 0
    assert "--enforce-eager" in result.output and "--dtype" in result.output
