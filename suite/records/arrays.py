"""Arrays in ``.npz`` files (``suite sample``'s samples, read back by ``suite score``): checked before they are allocated.

An ``.npz`` is a zip archive of ``.npy`` members, each starting with a header that states its dtype and shape;
``numpy.load`` allocates what the header states before it reads a byte of the data, so a file of a few hundred
bytes can ask for terabytes. :func:`read_arrays` reads every wanted member's header first
(:func:`numpy.lib.format.read_array_header_1_0` / ``_2_0`` on the zip member) and refuses, in one line naming the
file and the array, a member that is missing, of another kind of number than asked, holds Python objects (a
pickle: never loaded), or is larger than the limit; only then are the arrays read.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

KINDS = {"f": "floating-point", "i": "integer", "u": "integer", "b": "boolean"}
"""numpy's dtype kinds that an array may be asked to have, and their names in messages."""


class ArrayFileError(ValueError):
    """An ``.npz`` file is not one the suite reads; one line naming the file and the array."""


def array_headers(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype of every array in the ``.npz`` at ``path``, from the members' headers (no data is read)."""
    import numpy as np

    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise ArrayFileError(f"{path}: not an .npz archive (not a zip file), as `suite sample` writes them")
    headers = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                    shape, _, dtype = read(member, max_header_size=10_000)
                headers[info.filename.removesuffix(".npy")] = (tuple(shape), dtype)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError) as error:
        raise ArrayFileError(f"{path}: not a readable .npz archive ({' '.join(str(error).split())[:160]})") from None
    return headers


def read_arrays(
    path: str | os.PathLike, wanted: dict[str, str], max_bytes: int, optional: tuple[str, ...] = ()
) -> dict[str, np.ndarray]:
    """The arrays ``wanted`` (name -> the dtype kinds it may have, ``"f"``, ``"iu"``) of the ``.npz`` at ``path``,
    after their headers are checked (module docstring): together at most ``max_bytes``. Names in ``optional`` may
    be missing (and are then left out)."""
    import numpy as np

    path = Path(path)
    headers = array_headers(path)
    total = 0
    for name, kinds in wanted.items():
        if name not in headers:
            if name in optional:
                continue
            found = ", ".join(sorted(headers)[:10]) or "nothing"
            raise ArrayFileError(f"{path}: {name}: no such array (it holds {found}); write it with `suite sample`")
        shape, dtype = headers[name]
        if dtype.hasobject or dtype.kind not in kinds:
            expected = " or ".join(sorted({KINDS[k] for k in kinds}))
            raise ArrayFileError(f"{path}: {name}: expected {expected} numbers, got dtype {str(dtype)[:40]}")
        total += math.prod(shape) * dtype.itemsize
        if total > max_bytes:
            raise ArrayFileError(
                f"{path}: {name}: shape {shape[:6]} of {dtype} is {math.prod(shape) * dtype.itemsize:,} bytes; "
                f"the arrays may hold {max_bytes:,} bytes together"
            )
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: np.asarray(archive[name]) for name in wanted if name in headers}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise ArrayFileError(f"{path}: not a readable .npz archive ({' '.join(str(error).split())[:160]})") from None
