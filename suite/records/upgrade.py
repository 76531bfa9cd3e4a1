"""Records of older schema versions, brought to the meaning of this one as they are read (:func:`upgraded`).

Schema 5 changed what ``train_s`` (now the training clock, warm-up included) and ``images_per_s`` (now training
images over that clock) mean, the same way for every strategy; how an older record's values move is in
docs/results.md and in :func:`upgraded`. Where the record lacks what the new rate needs, it is unknown (null). The
interval ``images_per_s_ci95`` keeps its relative width. Nothing else changed meaning.
"""

from __future__ import annotations

from typing import Any

from ..config.plan import discriminator_batches

UPGRADED_FROM = 4
"""The last schema whose records :func:`upgraded` rewrites (those of 5 and later are as written)."""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _training_images(data: dict[str, Any]) -> int | None:
    """An older record's training images: ``images_consumed``, less a cellular grid's generator-only batches."""
    consumed = data.get("images_consumed")
    if not isinstance(consumed, int) or isinstance(consumed, bool):
        return None
    batches = data.get("batches_per_iteration")  # a grid's cells: batches (generator steps) per iteration
    cellular = (data.get("settings") or {}).get("cellular")  # settings is a free-form mapping: its parts are unchecked
    skip = cellular.get("discriminator_skip") if isinstance(cellular, dict) else None
    if isinstance(batches, int) and batches > 0 and isinstance(skip, int) and skip > 0:
        return consumed // batches * discriminator_batches(batches, skip)
    return consumed


def upgraded(data: dict[str, Any], current: int) -> dict[str, Any]:
    """``data`` (a checked record) in the meaning of the ``current`` schema (the record module's version, passed in so
    that this module does not import it back): as it is where it is of schema 5 or later, else a copy with ``train_s``,
    the clock readings, ``images_per_s`` and ``train_images`` rewritten (docs/results.md)."""
    version = data.get("schema", 1)
    if not isinstance(version, int) or version > UPGRADED_FROM:
        return data
    data = dict(data, schema=current)
    train_s, warmup_s = _number(data.get("train_s")), _number(data.get("warmup_s"))
    if train_s is not None and warmup_s is not None:
        train_s = data["train_s"] = train_s + warmup_s
        if isinstance(data.get("curve"), list):
            data["curve"] = [
                dict(p, clock_s=p["clock_s"] + warmup_s) if isinstance(p, dict) and (_number(p.get("clock_s")) or 0) > 0 else p
                for p in data["curve"]
            ]
        target = data.get("time_to_target")
        if isinstance(target, dict) and _number(target.get("clock_s")) is not None:
            data["time_to_target"] = dict(target, clock_s=target["clock_s"] + warmup_s)
    if "train_s" not in data:  # a failed run's record: nothing was measured
        return data
    images = data["train_images"] = _training_images(data)
    old_rate = _number(data.get("images_per_s"))
    rate = images / train_s if images and train_s else None
    data["images_per_s"] = rate
    procs = data.get("procs")
    data["images_per_s_per_rank"] = rate / procs if rate is not None and isinstance(procs, int) and procs > 0 else None
    ci = data.get("images_per_s_ci95")
    if isinstance(ci, list) and rate is not None and old_rate:
        data["images_per_s_ci95"] = [None if _number(c) is None else c * rate / old_rate for c in ci]
    elif "images_per_s_ci95" in data:
        data["images_per_s_ci95"] = None
    return data
