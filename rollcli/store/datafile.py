"""Data-only state files: nested state as JSON plus one ``.npz`` of arrays, never a pickle.

Checkpoints live in run folders on shared cluster file systems, so reading one must not be able
to run code. :func:`save_data` writes ``<name>.json`` (the structure: dicts, lists, tuples,
strings, numbers, booleans, None, bytes) and, when the state holds arrays, ``<name>.npz``
(``numpy.savez``, or deflated with ``compressed=True``; read back with ``allow_pickle=False``, so an object array or any pickled
payload in the file is refused). numpy arrays and scalars keep their dtype and shape; torch
tensors are stored as numpy arrays (dtypes numpy lacks, such as bfloat16, as raw bits) and come
back as tensors; object arrays (verl's ``non_tensor_batch``) are stored element by element in
the JSON. Anything else is a ``TypeError`` naming where it sits, at save time. torch is imported
only when a tensor is met.
"""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_bytes, atomic_write_text, read_json

__all__ = ["DataFileError", "load_data", "save_data", "data_files"]

_MARK = "__rollcli__"  # key of every tagged node; plain dicts never carry it


class DataFileError(ValueError):
    """A state file that is not what :func:`save_data` writes (torn, crafted, or foreign)."""


def data_files(folder: str | os.PathLike[str], name: str) -> list[Path]:
    """The files :func:`save_data` writes for ``name`` (the .npz only when it exists)."""
    folder = Path(folder)
    return [p for p in (folder / f"{name}.json", folder / f"{name}.npz") if p.exists()]


class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, Any] = {}

    def _array(self, value: Any) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = value
        return key

    def encode(self, obj: Any, where: str) -> Any:
        import numpy as np

        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, tuple):
            return {
                _MARK: "tuple",
                "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)],
            }
        if isinstance(obj, dict):
            if all(isinstance(k, str) for k in obj) and _MARK not in obj:
                return {k: self.encode(v, f"{where}.{k}") for k, v in obj.items()}
            items = [
                [self.encode(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in obj.items()
            ]
            return {_MARK: "dict", "items": items}
        if isinstance(obj, (bytes, bytearray)):
            return {_MARK: "bytes", "b64": base64.b64encode(bytes(obj)).decode()}
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                flat = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj.ravel().tolist())]
                return {_MARK: "objects", "shape": list(obj.shape), "items": flat}
            return {_MARK: "array", "key": self._array(obj)}
        if isinstance(obj, np.generic):
            return {_MARK: "scalar", "key": self._array(np.asarray(obj))}
        torch = _torch_if_tensor(obj)
        if torch is not None:
            tensor = obj.detach().cpu()
            try:
                return {_MARK: "tensor", "key": self._array(tensor.numpy())}
            except TypeError:  # bfloat16 and friends: store the bits, keep the dtype's name
                bits = tensor.view(_same_width_int(torch, tensor.dtype)).numpy()
                return {_MARK: "tensor", "key": self._array(bits), "dtype": str(tensor.dtype)}
        raise TypeError(f"state at {where or 'the top'} is a {type(obj).__name__}: not data")


def _torch_if_tensor(obj: Any) -> Any:
    module = type(obj).__module__
    if not module.startswith("torch"):
        return None
    import torch

    return torch if isinstance(obj, torch.Tensor) else None


def _same_width_int(torch: Any, dtype: Any) -> Any:
    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]


def save_data(
    folder: str | os.PathLike[str], name: str, obj: Any, *, compressed: bool = False
) -> None:
    """Write ``obj`` as ``<name>.json`` (+ ``<name>.npz``) in ``folder``, each file atomically;
    ``compressed`` deflates the arrays (worth it for padded token ids and masks: mostly zeros),
    and :func:`load_data` reads either form."""
    import numpy as np

    encoder = _Encoder()
    tree = encoder.encode(obj, "")
    folder = Path(folder)
    npz = folder / f"{name}.npz"
    if encoder.arrays:
        buffer = io.BytesIO()
        if compressed:
            _savez_fast_deflate(buffer, encoder.arrays)
        else:
            np.savez(buffer, **encoder.arrays)
        atomic_write_bytes(npz, buffer.getvalue())
    elif npz.exists():
        npz.unlink()
    meta = {"format": 1, "arrays": len(encoder.arrays), "state": tree}
    atomic_write_text(folder / f"{name}.json", json.dumps(meta) + "\n")  # key order kept


def _savez_fast_deflate(buffer: io.BytesIO, arrays: dict[str, Any]) -> None:
    """``numpy.savez_compressed`` at deflate level 1: on padded token rows it compresses as well
    as savez_compressed's level 6 in about a quarter of the CPU time (docs/LOG.md, 2026-12-02)."""
    import numpy as np

    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for key, value in arrays.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def load_data(folder: str | os.PathLike[str], name: str) -> Any:
    """Read what :func:`save_data` wrote; raises :class:`DataFileError` for anything else."""
    import numpy as np

    folder = Path(folder)
    path = folder / f"{name}.json"
    try:
        meta = read_json(path)
    except (OSError, ValueError, RecursionError) as error:
        raise DataFileError(f"{path}: unreadable ({error})") from error
    if not isinstance(meta, dict) or meta.get("format") != 1 or "state" not in meta:
        raise DataFileError(f"{path}: not a rollcli state file")
    arrays: dict[str, Any] = {}
    if meta.get("arrays"):
        npz = folder / f"{name}.npz"
        try:
            with np.load(io.BytesIO(npz.read_bytes()), allow_pickle=False) as stored:
                arrays = {key: stored[key] for key in stored.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:  # pickles: ValueError
            raise DataFileError(f"{npz}: unreadable or not plain arrays ({error})") from error
    try:
        return _decode(meta["state"], arrays)
    except (KeyError, TypeError, ValueError, RecursionError) as error:
        raise DataFileError(f"{path}: malformed state ({type(error).__name__}: {error})") from error


def _decode(node: Any, arrays: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    tag = node.get(_MARK)
    if tag is None:
        return {k: _decode(v, arrays) for k, v in node.items()}
    if tag == "tuple":
        return tuple(_decode(v, arrays) for v in node["items"])
    if tag == "dict":
        return {_hashable(_decode(k, arrays)): _decode(v, arrays) for k, v in node["items"]}
    if tag == "bytes":
        return base64.b64decode(node["b64"], validate=True)
    if tag == "objects":
        import numpy as np

        items = [_decode(v, arrays) for v in node["items"]]
        out = np.empty(len(items), dtype=object)
        out[:] = items if items else []
        return out.reshape([int(n) for n in node["shape"]])
    if tag == "array":
        return arrays[node["key"]]
    if tag == "scalar":
        return arrays[node["key"]][()]
    if tag == "tensor":
        import torch

        tensor = torch.from_numpy(arrays[node["key"]].copy())
        if "dtype" in node:
            name = str(node["dtype"]).removeprefix("torch.")
            dtype = getattr(torch, name, None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"unknown tensor dtype {node['dtype']!r}")
            tensor = tensor.view(dtype)
        return tensor
    raise ValueError(f"unknown tag {tag!r}")


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key
