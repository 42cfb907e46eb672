"""YAML loading that remembers where every key and value came from (file, line, column).

A spec error must point at the exact place to fix. PyYAML's composer gives each node a start
mark; this module walks the composed node tree once and records, for every path of the
document (``("allocators", "pc", "p_upper")``), the mark of the key and of the value. Paths
use strings for mapping keys and ints for sequence indices. Duplicate keys, which YAML would
silently collapse into the last one, are an error here.

Limits (a spec is a small hand-written file; anything past them is an attack or an accident,
and must fail in milliseconds rather than hang or exhaust memory): the path must be a regular
file (a FIFO or a device would block or never end) of at most ``MAX_SPEC_BYTES``; nesting at
most ``MAX_DEPTH`` levels; at most ``MAX_ALIASES`` aliases and ``MAX_NODES`` nodes once aliases
are expanded (a "billion laughs" alias bomb); integers of at most ``MAX_INT_DIGITS`` digits.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rollcli.errors import SpecError

__all__ = ["Mark", "Marks", "load_yaml", "read_spec_text", "Path_", "dotted"]

MAX_SPEC_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ALIASES = 100
MAX_NODES = 100_000
MAX_INT_DIGITS = 30
_INT_TAG = "tag:yaml.org,2002:int"

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Mark:
    """A place in a source: ``file:line:column`` (1-based), or a command-line override."""

    source: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.source}:{self.line}:{self.column}"
        return self.source


class Marks:
    """Value and key marks by document path; :meth:`find` falls back to the nearest parent."""

    def __init__(self) -> None:
        self.values: dict[Path_, Mark] = {}
        self.keys: dict[Path_, Mark] = {}
        self.interpolated: set[Path_] = set()  # values that came from ${...}

    def update(self, other: Marks, prefix: Path_ = ()) -> None:
        for path, mark in other.values.items():
            self.values[prefix + path] = mark
        for path, mark in other.keys.items():
            self.keys[prefix + path] = mark

    def drop(self, prefix: Path_) -> None:
        """Forget every mark under ``prefix`` (a deleted or replaced subtree)."""
        n = len(prefix)
        for table in (self.values, self.keys):
            for path in [p for p in table if p[:n] == prefix]:
                del table[path]

    def set(self, path: Path_, mark: Mark) -> None:
        self.drop(path)
        self.values[path] = mark
        self.keys[path] = mark

    def find(self, path: Path_, *, key: bool = False) -> Mark | None:
        """The mark of ``path`` (its key's mark if ``key``), else of its nearest ancestor."""
        table = self.keys if key else self.values
        for n in range(len(path), -1, -1):
            mark = table.get(path[:n]) or self.values.get(path[:n])
            if mark is not None:
                return mark
        return None


class _LimitedLoader(yaml.SafeLoader):
    """A SafeLoader whose composer refuses deep nesting and too many aliases (with a mark)."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self._source, self._depth, self._aliases = source, 0, 0

    def _refuse(self, message: str) -> SpecError:
        mark = self.peek_event().start_mark
        return SpecError(f"{self._source}:{mark.line + 1}:{mark.column + 1}: {message}")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._refuse(
                    f"more than {MAX_ALIASES} YAML aliases (*name); a spec needs few: repeat the "
                    "values or use ${...} interpolation"
                )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._refuse(f"values nest deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_size(node: yaml.Node, source: str) -> None:
    """Refuse a tree that aliases expand past MAX_NODES, and integers with too many digits."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        if isinstance(n, yaml.ScalarNode):
            total = 1
            digits = sum(c.isdigit() for c in n.value) if n.tag == _INT_TAG else 0
            if digits > MAX_INT_DIGITS:
                raise SpecError(
                    f"{_mark(source, n)}: an integer of {digits} digits is out of any range"
                )
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(item) for item in n.value)
        else:
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        sizes[id(n)] = total
        if total > MAX_NODES:
            raise SpecError(
                f"{_mark(source, n)}: the spec expands to more than {MAX_NODES:,} values "
                "(YAML aliases repeated inside aliases?)"
            )
        return total

    size(node)


def read_spec_text(path: Path) -> str:
    """The text of a spec file: a regular file of at most MAX_SPEC_BYTES, UTF-8 (else SpecError).

    Opened non-blocking and checked with fstat before reading, so a FIFO, a device or a folder
    is refused at once instead of blocking or reading forever.
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SpecError(f"{source}: spec file not found; check the path") from None
    except IsADirectoryError:
        raise SpecError(
            f"{source}: is a folder, not a regular file; give the spec's path"
        ) from None
    except OSError as error:
        raise SpecError(f"{source}: cannot read the spec: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, device or socket"
            raise SpecError(f"{source}: is {kind}, not a regular file; a spec is a YAML text file")
        if info.st_size > MAX_SPEC_BYTES:
            raise SpecError(
                f"{source}: the spec is too large ({info.st_size:,} bytes; at most "
                f"{MAX_SPEC_BYTES:,}); a spec is a small YAML text file"
            )
        data = os.read(fd, MAX_SPEC_BYTES + 1)
    except OSError as error:
        raise SpecError(f"{source}: cannot read the spec: {error.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"{source}: the spec is too large (over {MAX_SPEC_BYTES:,} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SpecError(
            f"{source}: cannot read the spec: not UTF-8 text (byte {error.object[error.start]:#04x} "
            f"at offset {error.start}); is it a binary file? A spec is a YAML text file"
        ) from None


def _mark(source: str, node: yaml.Node) -> Mark:
    return Mark(source, node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, path: Path_, source: str, marks: Marks) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key == "<<":
                continue  # YAML merge key: its content is marked where it was defined
            if key in seen:
                first = _mark(source, seen[key])
                raise SpecError(
                    f"{_mark(source, key_node)}: {'.'.join(map(str, path + (key,)))}: duplicate key "
                    f"'{key}' (first defined at line {first.line}); keep only one"
                )
            seen[key] = key_node
            child = path + (key,)
            marks.keys[child] = _mark(source, key_node)
            marks.values[child] = _mark(source, value_node)
            _walk(value_node, child, source, marks)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = path + (index,)
            marks.values[child] = marks.keys[child] = _mark(source, item)
            _walk(item, child, source, marks)


def load_yaml(path: Path, text: str | None = None) -> tuple[dict[str, Any], Marks]:
    """Parse a YAML mapping from ``path`` and return it with the marks of every node."""
    source = str(path)
    if text is None:
        text = read_spec_text(Path(path))
    elif len(text) > MAX_SPEC_BYTES:
        raise SpecError(f"{source}: the spec is too large (over {MAX_SPEC_BYTES:,} characters)")
    try:
        loader = _LimitedLoader(text, source)  # rejects control characters (NUL, ...) at once
    except yaml.reader.ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        raise SpecError(
            f"{source}:{line}:{column}: cannot read the spec: character #x{error.character:04x} "
            f"is not allowed in YAML; is it a binary file? A spec is a YAML text file"
        ) from None
    loader.name = source
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_size(node, source)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = " ".join(str(part) for part in (error.context, error.problem) if part)
        raise SpecError(
            f"{where}: YAML syntax error: {problem}; fix the YAML at that place"
        ) from None
    except yaml.YAMLError as error:
        raise SpecError(f"{source}: YAML error: {error}") from None
    finally:
        loader.dispose()
    if data is None:
        raise SpecError(f"{source}:1:1: the spec is empty; start from `rollcli init NAME`")
    if not isinstance(data, dict):
        raise SpecError(
            f"{source}:1:1: expected a mapping of spec sections (name, backend, ...), "
            f"found a {type(data).__name__}"
        )
    marks = Marks()
    marks.values[()] = marks.keys[()] = Mark(source, 1, 1)
    _walk(node, (), source, marks)
    for key in data:
        if not isinstance(key, str):
            raise SpecError(f"{marks.find((key,), key=True)}: keys must be strings, found {key!r}")
    return data, marks


def dotted(path: Path_) -> str:
    """A field path as written in messages: ``allocators.pc.p_lower``, ``eval.suite[1]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<spec>"
