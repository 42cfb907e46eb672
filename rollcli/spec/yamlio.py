"""YAML loading that remembers where every key and value came from (file, line, column).

A spec error must point at the exact place to fix. PyYAML's composer gives each node a start
mark; this module walks the composed node tree once and records, for every path of the
document (``("allocators", "pc", "p_upper")``), the mark of the key and of the value. Paths
use strings for mapping keys and ints for sequence indices. Duplicate keys, which YAML would
silently collapse into the last one, are an error here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rollcli.errors import SpecError

__all__ = ["Mark", "Marks", "load_yaml", "Path_"]

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
        try:
            text = Path(path).read_text("utf-8")
        except FileNotFoundError:
            raise SpecError(f"{source}: spec file not found; check the path") from None
        except OSError as error:
            raise SpecError(f"{source}: cannot read the spec: {error.strerror}") from None
        except UnicodeDecodeError as error:
            raise SpecError(
                f"{source}: cannot read the spec: not UTF-8 text (byte {error.object[error.start]:#04x} "
                f"at offset {error.start}); is it a binary file? A spec is a YAML text file"
            ) from None
    try:
        loader = yaml.SafeLoader(text)  # rejects control characters (NUL, ...) right away
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
