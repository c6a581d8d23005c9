"""Counterexample files: saved and loaded as data only, never as code.

Failure files travel between teams as CI artifacts, so loading one must not run
anything (a pickle can). A case file is an ``.npz`` archive read with
``allow_pickle=False``: every array of the case is one member, and the member
``__case__`` holds a JSON header (UTF-8 bytes as a uint8 array) with the op, the
run's settings and the structure of the arguments, in which each array appears
as ``{"$array": member}``. Tuples are ``{"$tuple": [...]}``; dicts keep string
keys; numbers, strings, booleans and None are JSON values (non-finite floats as
``{"$float": "nan" | "inf" | "-inf"}``).

Anything else (a pickle, an archive without the header, object arrays, an
unknown tag) is refused with ``CaseFileError`` naming the file and the reason.
"""
from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["CaseFileError", "save_case", "load_case", "SUFFIX"]

#: file name suffix of case files
SUFFIX = ".npz"
_HEADER = "__case__"
_FORMAT = "mmvref-conformance-case/1"


class CaseFileError(ValueError):
    """A file that is not a counterexample saved by ``save_case``."""


def _encode(v, arrays):
    if isinstance(v, np.ndarray) or isinstance(v, np.generic):
        a = np.asarray(v)
        if a.dtype.hasobject:
            raise TypeError(f"cannot save an object array ({a.dtype}) in a case file")
        key = f"a{len(arrays)}"
        arrays[key] = a
        return {"$array": key, "scalar": isinstance(v, np.generic)}
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$float": repr(v)}
    if isinstance(v, tuple):
        return {"$tuple": [_encode(x, arrays) for x in v]}
    if isinstance(v, list):
        return [_encode(x, arrays) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise TypeError("case file dicts need string keys")
        return {"$dict": {k: _encode(x, arrays) for k, x in v.items()}}
    raise TypeError(f"cannot save a {type(v).__name__} in a case file")


def save_case(path, case: dict) -> Path:
    """Write ``case`` (a dict with string keys: op, args, kwargs, settings) to ``path``
    (``.npz`` appended if missing). TypeError for a value that is not data."""
    path = Path(path)
    if path.suffix != SUFFIX:
        path = path.with_name(path.name + SUFFIX)
    arrays: dict[str, np.ndarray] = {}
    body = _encode(case, arrays)
    header = json.dumps({"format": _FORMAT, "case": body}).encode()
    arrays[_HEADER] = np.frombuffer(header, dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def _decode(v, arrays, path):
    if isinstance(v, list):
        return [_decode(x, arrays, path) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) == 1 and "$tuple" in v and isinstance(v["$tuple"], list):
        return tuple(_decode(x, arrays, path) for x in v["$tuple"])
    if len(v) == 1 and "$dict" in v and isinstance(v["$dict"], dict):
        return {k: _decode(x, arrays, path) for k, x in v["$dict"].items()}
    if len(v) == 1 and v.get("$float") in ("nan", "inf", "-inf"):
        return float(v["$float"])
    if set(v) == {"$array", "scalar"} and isinstance(v["$array"], str):
        if v["$array"] not in arrays:
            raise CaseFileError(f"{path}: the header names an array {v['$array']!r} the file does not hold")
        a = arrays[v["$array"]]
        return a[()] if v["scalar"] else a
    raise CaseFileError(f"{path}: unknown entry in the header: {json.dumps(v)[:80]}")


def load_case(path) -> dict:
    """Read a case file written by ``save_case``; nothing in it is executed.
    CaseFileError (a ValueError) for a missing file or one that is not such data."""
    path = Path(path)
    if not path.is_file():
        raise CaseFileError(f"{path}: no such case file")
    if not zipfile.is_zipfile(path):
        raise CaseFileError(f"{path}: not a case file (an .npz archive saved by the conformance suite); "
                            f"it is not loaded, as other formats (pickles) can run code")
    try:
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            if _HEADER not in names:
                raise CaseFileError(f"{path}: an .npz archive without the {_HEADER} header: not a case file")
            arrays = {k: z[k] for k in names}
    except CaseFileError:
        raise
    except ValueError as exc:  # object arrays need pickle: refused
        raise CaseFileError(f"{path}: holds data that only a pickle can load ({exc}); refused") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise CaseFileError(f"{path}: unreadable archive ({exc})") from None
    hdr = arrays.pop(_HEADER)
    try:
        meta = json.loads(hdr.astype(np.uint8).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaseFileError(f"{path}: the header is not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise CaseFileError(f"{path}: unknown case file format {meta.get('format') if isinstance(meta, dict) else meta!r}")
    case = _decode(meta.get("case"), arrays, path)
    if not isinstance(case, dict) or not isinstance(case.get("op"), str):
        raise CaseFileError(f"{path}: the header holds no op")
    return case
