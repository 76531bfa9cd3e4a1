"""The scores' cache files (``$SUITE_CACHE/stats``): written with a digest beside them, checked before they are used.

A cache may be shared, and forged real-data statistics change every FID scored against them. So every
cache file is written with ``NAME.sha256`` beside it (:mod:`suite.records.integrity`), and since anyone
who can write the cache can write both, the statistics are also checked against the features stored
with them: ``mu`` their mean, ``n`` their count, ``sigma`` their covariance, the last by Freivalds'
check with :data:`SIGMA_PROBES` fresh random directions. A file that fails is not used: a warning names
it and the statistics are computed again. docs/reliability.md gives the forgeries this stops.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ...records.integrity import damage, digest_file
from ...records.results import atomic_write, atomic_write_text

log = logging.getLogger(__name__)

DIGEST_SUFFIX = ".sha256"
SIGMA_PROBES = 4
"""Random directions along which a stored ``sigma`` is checked against the covariance of its features."""


def digest_path(path: Path) -> Path:
    """Where the digest of the cache file ``path`` is written: ``NAME.sha256`` beside it."""
    return path.with_name(path.name + DIGEST_SUFFIX)


def _problem(path: Path) -> str | None:
    """Why the cache file ``path`` is not the one the suite wrote (its digest missing, unreadable or not matching)."""
    try:
        written = json.loads(digest_path(path).read_text(encoding="utf-8"))
        size, sha256 = written["bytes"], written["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable digest beside it ({digest_path(path).name})"
    if not isinstance(size, int) or not isinstance(sha256, str):
        return f"no readable digest beside it ({digest_path(path).name})"
    problem = damage(path, size, sha256)
    return None if problem is None else f"{problem}, against the digest beside it"


def _statistics_problem(values: dict[str, Any]) -> str | None:
    """Why stored statistics disagree with the features stored with them (``mu`` not their mean), or None."""
    if "mu" not in values or "features" not in values:
        return None
    mu, features = np.asarray(values["mu"], dtype=np.float64), np.asarray(values["features"], dtype=np.float64)
    if features.ndim != 2 or mu.shape != features.shape[1:] or not np.isfinite(mu).all():
        return "its mu does not fit its features"
    if not np.allclose(mu, features.mean(axis=0), rtol=1e-4, atol=1e-6 * max(1.0, float(np.abs(features).max()))):
        return "its mu is not the mean of its features"
    if "n" in values and int(np.asarray(values["n"]).reshape(-1)[0]) != len(features):
        return f"its n is not the count of its {len(features):,} features"
    if "sigma" in values:
        return _sigma_problem(np.asarray(values["sigma"], dtype=np.float64), features - mu)
    return None


def _sigma_problem(sigma: np.ndarray, centred: np.ndarray) -> str | None:
    """Why ``sigma`` is not the covariance of the ``centred`` features, or None: its shape, its symmetry and
    :data:`SIGMA_PROBES` fresh random products with it (Freivalds' check, see the module's docstring)."""
    count, dim = centred.shape
    if sigma.shape != (dim, dim) or not np.isfinite(sigma).all() or count < 2:
        return "its sigma does not fit its features"
    scale = max(float(np.abs(sigma).max()), 1e-300)
    if not np.allclose(sigma, sigma.T, rtol=0, atol=1e-9 * scale):
        return "its sigma is not symmetric: not a covariance"
    probes = np.random.default_rng().standard_normal((dim, SIGMA_PROBES))  # fresh: a forger cannot aim at them
    expected = centred.T @ (centred @ probes) / (count - 1)
    if not np.allclose(sigma @ probes, expected, rtol=1e-5, atol=1e-7 * float(np.abs(expected).max() + scale)):
        return "its sigma is not the covariance of its features"
    return None


def _unusable(path: Path, problem: str) -> None:
    log.warning("%s: %s; not used, computed again", path, problem)


def _checked(path: Path) -> bool:
    """Whether the cache file ``path`` is there and matches the digest beside it (a warning names one that does not)."""
    if not path.is_file():
        return False
    if (problem := _problem(path)) is not None:
        _unusable(path, problem)
        return False
    return True


def read_cached_arrays(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of the cache file ``path`` (an ``.npz``) when it is there and checks out; None otherwise (a
    warning names a file that does not)."""
    if not _checked(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            values = {k: stored[k] for k in stored.files}
    except (OSError, ValueError) as error:
        _unusable(path, f"not readable ({error})")
        return None
    if (problem := _statistics_problem(values)) is not None:
        _unusable(path, problem)
        return None
    return values


def write_cached_arrays(path: Path, values: dict[str, Any]) -> None:
    """Write ``values`` as the cache file ``path`` (an ``.npz``), then its digest beside it."""
    with atomic_write(path) as tmp:
        np.savez(tmp, **values)
    atomic_write_text(digest_path(path), json.dumps(asdict(digest_file(path))))


def read_cached_json(path: Path) -> Any:
    """The data of the JSON cache file ``path`` when it is there and checks out; None otherwise (a warning names it)."""
    if not _checked(path):
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        _unusable(path, f"not readable ({error})")
        return None


def write_cached_json(path: Path, data: Any) -> None:
    """Write ``data`` as the JSON cache file ``path``, then its digest beside it."""
    atomic_write_text(path, json.dumps(data))
    atomic_write_text(digest_path(path), json.dumps(asdict(digest_file(path))))
