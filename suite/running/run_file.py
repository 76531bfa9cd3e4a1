"""A run's settings as a rank reads them: ``RUN_DIR/run.json``, read once and checked against the sha256 of the bytes
``suite run`` wrote (``--run-sha256``), so that the settings cannot change between the launcher's write and the rank's
read (:func:`read_run`)."""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

from ..config.jsonfile import MAX_BYTES, json_from_bytes
from ..config.scenario import Run
from ..records.nofollow import open_regular
from ..records.results import RUN_FILE
from .commands import RUN_DIGEST_OPTION


class RunFileChanged(ValueError):
    """``run.json`` is not the bytes ``suite run`` wrote (their sha256 is not the one its command gave); one line."""


def sha256_hex(text: str) -> str:
    """``--run-sha256``'s value: 64 hexadecimal digits (lower case)."""
    if len(text) != 64 or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise argparse.ArgumentTypeError(f"expected a sha256 of 64 hexadecimal digits, got {text[:80]!r}")
    return text.lower()


def read_run(run_dir: Path, expected_sha256: str | None = None) -> Run:
    """The run of ``run_dir/run.json``, read once (no link followed, no FIFO waited on, at most the JSON reader's cap),
    hashed and parsed from those same bytes. With ``expected_sha256`` (``--run-sha256``) other bytes are refused
    (:class:`RunFileChanged`, naming both digests) before anything is parsed; without (a hand launch) the file is taken as
    it is. A file that is not a run is a ``ValueError`` naming it."""
    path = run_dir / RUN_FILE
    with open(open_regular(path, os.O_RDONLY), "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise RunFileChanged(
            f"{path} changed after suite run wrote it (sha256 {digest}, expected {expected_sha256.lower()}): it is not "
            "the run that was launched, so nothing was run; run `suite run` again to write it anew (a worker started "
            f"by hand without {RUN_DIGEST_OPTION} runs the file as it is)"
        )
    return Run.from_dict(json_from_bytes(data, str(path)))
