"""A batch job's walltime: ``--walltime`` in Slurm's ``--time`` forms, read once and written in each scheduler's."""

from __future__ import annotations

import math
import re

from ..config.shown import shown

DEFAULT_WALLTIME = "2:00:00"
"""``--walltime`` when none is given, or the site queue's limit for the job's nodes where that is shorter."""

WARNING_S = 120
"""Seconds before the walltime at which the scheduler sends SIGTERM; ``--grace`` fits inside them."""

WALLTIME_FORMS = (
    "MINUTES, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS "
    "or a number with a unit (90m, 6h, 1d, 5400s)"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_walltime(text: str) -> int:
    """``--walltime`` in seconds, from Slurm's ``--time`` forms or a number with a unit.

    Slurm's forms: ``M``, ``H:MM:SS``, ``D-H``, ``D-H:MM``, ``D-H:MM:SS`` (minutes and seconds
    below 60), and a single number with a unit: ``5400s``, ``90m``, ``6h``, ``1d``. Slurm's
    ``MM:SS`` is refused: this suite read two fields as HH:MM before, and reading ``06:00`` as
    six minutes now would cut jobs short without a word. The walltime must leave room for the
    scheduler's warning (:data:`WARNING_S`). Errors are :class:`ValueError` naming ``--walltime``.
    """

    def bad(why: str) -> ValueError:
        return ValueError(f"--walltime {shown(text)}: {why}")

    value = text.strip().lower()
    clock = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", value)
    if re.fullmatch(r"\d+[smhd]", value):
        seconds = int(value[:-1]) * _UNITS[value[-1]]
    elif not clock:
        raise bad(f"expected {WALLTIME_FORMS}")
    else:
        days, first, second, third = clock.groups()  # days, second and third may be absent
        if days is None and second is None:  # M
            hours, minutes, secs = 0, int(first), 0
        elif days is None and third is None:
            h, m = int(first), int(second)
            raise bad(
                "ambiguous: Slurm reads MM:SS, this suite read HH:MM before; "
                f"write {h}:{m:02d}:00 for {h} h {m} min or 0:{h:02d}:{m:02d} for {h} min {m} s"
            )
        else:  # H:MM:SS, D-H, D-H:MM, D-H:MM:SS
            hours, minutes, secs = int(first), int(second or 0), int(third or 0)
            if minutes > 59 or secs > 59:
                raise bad("minutes and seconds after a colon must be below 60")
        seconds = (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + secs
    if seconds <= WARNING_S:
        raise bad(f"must be longer than the {WARNING_S} s warning the scheduler sends before it (SIGTERM)")
    return seconds


def slurm_time(seconds: int) -> str:
    """``#SBATCH --time``: ``HH:MM:SS`` below a day, ``D-HH:MM:SS`` from one."""
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def lsf_time(seconds: int) -> str:
    """``#BSUB -W``: ``HH:MM`` (hours may pass 24); LSF counts whole minutes, so seconds round up, as Slurm does."""
    minutes = math.ceil(seconds / 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"
