"""Refuse a verl checkpoint whose pickles could run code, before verl loads it.

verl 0.9.1 reads its own checkpoints with ``torch.load(..., weights_only=False)`` (model,
optimizer, extra state, dataloader): any callable named in those pickles runs on resume. Run
folders sit on shared cluster file systems, so before a verl job resumes, every ``*.pt`` of the
checkpoint it will resume from is scanned *statically* (``pickletools``: opcodes are read, never
executed) — every pickle torch would unpickle, found the way ``torch.load`` finds them (zip or
not by the first four bytes; all five pickles of the legacy format; polyglots refused) — and
every global it names must be on an explicit allowlist of exact
``(module, name)`` pairs — the tensor, storage, DTensor and container rebuilders verl's
checkpoints use, nothing by module prefix. A file that names anything else, that cannot be
scanned, or that uses old protocols' arbitrary-instance opcodes is refused with
:class:`UnsafeCheckpointError` naming it. No torch import here.
"""

from __future__ import annotations

import contextlib
import pickletools
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from rollcli.errors import RollcliError

__all__ = ["ALLOWED_GLOBALS", "UnsafeCheckpointError", "pickle_globals", "check_checkpoint_dir"]

_STORAGES = ["Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte",
             "Bool", "ComplexFloat", "ComplexDouble"]  # fmt: skip
_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
           "uint8", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"]  # fmt: skip
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    [
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch._utils", "_rebuild_tensor_v3"),
        ("torch._utils", "_rebuild_parameter"),
        ("torch._utils", "_rebuild_parameter_with_state"),
        ("torch._utils", "_rebuild_wrapper_subclass"),
        ("torch._tensor", "_rebuild_from_type_v2"),  # calls only globals checked here too
        ("torch.serialization", "_get_layout"),
        ("torch.distributed._mesh_layout", "_FlatLayout"),
        ("torch.distributed._mesh_layout", "_MeshLayout"),
        ("torch.distributed.tensor._dtensor_spec", "ShardOrderEntry"),
        ("torch", "Size"),
        ("torch", "device"),
        ("torch", "dtype"),
        ("torch.storage", "UntypedStorage"),
        ("torch", "UntypedStorage"),
        ("torch.distributed.tensor", "DTensor"),
        ("torch.distributed.tensor._api", "DTensor"),
        ("torch.distributed.tensor._dtensor_spec", "DTensorSpec"),
        ("torch.distributed.tensor._dtensor_spec", "TensorMeta"),
        ("torch.distributed.tensor.placement_types", "Shard"),
        ("torch.distributed.tensor.placement_types", "Replicate"),
        ("torch.distributed.device_mesh", "DeviceMesh"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "tuple"),
        ("builtins", "list"),
        ("builtins", "dict"),
        ("builtins", "slice"),
        ("builtins", "complex"),
        ("_codecs", "encode"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.dtypes", "UInt32DType"),
        ("numpy.dtypes", "Float64DType"),
        ("numpy.dtypes", "Int64DType"),
        ("torch.torch_version", "TorchVersion"),
        *[("torch", f"{kind}Storage") for kind in _STORAGES],
        *[("torch", dtype) for dtype in _DTYPES],
    ]
)
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING",
               "BINSTRING", "STRING"}  # fmt: skip
_REFUSED_OPS = {"INST", "OBJ"}  # build arbitrary instances without a global we can check


class UnsafeCheckpointError(RollcliError):
    """A checkpoint file names a callable outside the allowlist, or cannot be scanned."""


def pickle_globals(data: bytes) -> set[tuple[str, str]]:
    """Every (module, name) a pickle would import, read from its opcodes without running it.

    Raises ValueError where a global cannot be determined statically (then it is not safe).
    """
    found: set[tuple[str, str]] = set()
    pushed: list[str | None] = []  # recent pushes: the string, or None for anything else
    memo: dict[int, str | None] = {}
    for opcode, arg, _ in pickletools.genops(data):
        name = opcode.name
        if name in _REFUSED_OPS:
            raise ValueError(f"opcode {name} builds an object without a checkable global")
        if name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            found.add((module, attr))
            pushed.append(None)
        elif name == "STACK_GLOBAL":
            if len(pushed) < 2 or pushed[-1] is None or pushed[-2] is None:
                raise ValueError("STACK_GLOBAL with a module or name that is not a literal")
            found.add((pushed[-2], pushed[-1]))
            pushed[-2:] = [None]
        elif name in _STRING_OPS:
            pushed.append(str(arg))
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = pushed[-1] if pushed else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(int(arg)))
        else:
            pushed.append(None)
        del pushed[:-8]
    return found


_ZIP_MAGIC = b"PK\x03\x04"  # torch.serialization._is_zipfile: the first four bytes decide
_LEGACY_PICKLES = 5  # magic number, protocol version, sys info, the object, storage keys


def _pickles_of(path: Path) -> Iterable[tuple[str, bytes]]:
    """Every pickle ``torch.load`` would unpickle from ``path``, found the way torch finds them.

    torch decides zip-or-not by the first four bytes alone (``zipfile.is_zipfile`` looks for a
    central directory anywhere, so a pickle with a genuine zip appended fooled it): a zip file
    yields every ``.pkl`` member (duplicate names included); any other file is torch's legacy
    format, five pickles in a row (the third onwards used to go unread). Legacy files that
    also hold a zip archive (polyglots) and the pre-1.0 tar format are refused outright.
    """
    with path.open("rb") as f:
        head = f.read(len(_ZIP_MAGIC))
    if head == _ZIP_MAGIC:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename.endswith(".pkl"):
                    with archive.open(info) as member:
                        yield f"{path}:{info.filename}", member.read()
        return
    if zipfile.is_zipfile(path):
        raise ValueError("a legacy (non-zip) torch file that also holds a zip archive")
    with (
        contextlib.suppress(tarfile.TarError, OSError),
        path.open("rb") as f,
        tarfile.open(fileobj=f, mode="r:", format=tarfile.PAX_FORMAT),
    ):
        raise ValueError("the pre-1.0 tar checkpoint format (torch unpickles its members)")
    with path.open("rb") as f:
        for index in range(_LEGACY_PICKLES):
            start = f.tell()
            for _ in pickletools.genops(f):  # stops right after this pickle's STOP
                pass
            end = f.tell()
            f.seek(start)
            yield f"{path}:pickle {index + 1}", f.read(end - start)


def check_checkpoint_dir(folder: str | Path, allowed: frozenset = ALLOWED_GLOBALS) -> int:
    """Scan every ``*.pt``/``*.pth``/``*.bin`` under ``folder``; the number of files checked.

    Raises :class:`UnsafeCheckpointError` naming the first file that is not plain data.
    """
    checked = 0
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix not in (".pt", ".pth", ".bin") or not path.is_file():
            continue
        try:
            pickles = list(_pickles_of(path))
        except Exception as error:  # noqa: BLE001 - unscannable means unsafe
            raise UnsafeCheckpointError(f"{path}: cannot be checked ({error})") from error
        for where, data in pickles:
            try:
                names = pickle_globals(data)
            except Exception as error:  # noqa: BLE001 - unscannable means unsafe
                raise UnsafeCheckpointError(f"{where}: cannot be checked ({error})") from error
            bad = sorted(names - allowed)
            if bad:
                listed = ", ".join(f"{m}.{n}" for m, n in bad[:3])
                raise UnsafeCheckpointError(
                    f"{where}: names {listed}, which a checkpoint must not (it would run on "
                    "resume); remove this checkpoint folder to start from the previous one"
                )
        checked += 1
    return checked
