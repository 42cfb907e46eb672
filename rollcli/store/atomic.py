"""Atomic file writes and an append-only JSONL log that survives a crash at any instant.

A file is written to a temporary sibling, flushed and fsynced, then renamed over the target:
readers see the old or the new content, never half. JSONL appends write whole lines with one
``write`` call; a torn last line (a crash mid-append) is ignored and cut on the next append.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rollcli.errors import StoreError

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "read_json",
    "append_jsonl",
    "read_jsonl",
    "read_jsonl_lenient",
    "rewrite_jsonl",
    "open_nofollow",
]


# mkstemp creates 0600 files; written files get the usual 0666 & ~umask instead, so a run
# folder on a shared file system stays readable by the group (read once, at import)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        raise _naming(error, path) from error
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _naming(error: OSError, path: Path) -> OSError:
    """``error`` with the file it is about: a full disk (ENOSPC) on write or fsync carries no
    file name, and the CLI's one-line error should say which file could not be written."""
    if error.filename is not None:
        return error
    return type(error)(error.errno, error.strerror, str(path))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text("utf-8"))


def _json_default(obj: Any) -> Any:
    # numpy scalars and arrays without importing numpy here
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _valid_prefix_length(f: Any, size: int, chunk: int = 65536) -> int:
    """Byte length of the open file up to and including its last complete line.

    Reads backwards from the end, so the common case (the file ends with a newline) costs one
    byte, not a read of the whole file on every append.
    """
    end = size
    while end > 0:
        start = max(0, end - chunk)
        f.seek(start)
        cut = f.read(end - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def open_nofollow(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symlink (or anything but a regular file) at ``path``: run
    folders may be shared, and a planted link must not make rollcli write (or truncate)
    another file. Raises :class:`StoreError` naming the path."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise StoreError(
                f"{path} is a symbolic link; rollcli does not follow links for its lock and "
                "state files (someone with write access to this run folder planted it?): "
                "remove it"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StoreError(f"{path} is not a regular file: remove it")
    os.set_blocking(fd, True)
    return fd


def append_jsonl(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows as whole lines; a torn last line from an earlier crash is cut first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(
        json.dumps(row, sort_keys=True, default=_json_default) + "\n" for row in rows
    ).encode("utf-8")
    if not payload:
        return
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with os.fdopen(fd, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                valid = _valid_prefix_length(f, size)
                if valid != size:
                    f.truncate(valid)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
    except OSError as error:
        raise _naming(error, path) from error


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete rows of a JSONL file (a torn last line is ignored); [] if it does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text("utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        if line.strip():
            rows.append(json.loads(line))
    return rows


def read_jsonl_lenient(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of a JSONL file that parse as JSON objects, and one ``file:line: why`` per line that
    does not (a torn last line included). For readers that must survive a damaged file."""
    path = Path(path)
    if not path.exists():
        return [], []
    rows, problems = [], []
    data = path.read_bytes()
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            torn = number == data.count(b"\n") + 1
            why = "torn last line" if torn else f"not JSON ({str(error)[:60]})"
            problems.append(f"{path}:{number}: {why}")
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            problems.append(f"{path}:{number}: a {type(row).__name__}, not an object")
    return rows, problems


def rewrite_jsonl(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file atomically (used to drop rows written after the last checkpoint)."""
    text = "".join(json.dumps(r, sort_keys=True, default=_json_default) + "\n" for r in rows)
    atomic_write_text(path, text)
