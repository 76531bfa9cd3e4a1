"""Reading checkpoints back: each checkpoint's description (:class:`Mark`), where every rank resumes for a run's
settings (:func:`resume_plan`, the states it would load verified), the line saying so, and what no resume will read
(:func:`remove_stale`). :mod:`suite.train.checkpoint` writes them."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..config.jsonfile import JsonError, read_json
from ..config.scenario import Run
from ..config.schema import SchemaError, build
from ..records.integrity import damage
from ..records.nofollow import remove_files
from ..records.results import CHECKPOINT_DIR

FORMAT = 2
"""2: the description keeps the ``.pt``'s sha256, and states hold tensors and plain data only. Format 1 (no
sha256) still resumes, its size checked; its cellular states held numpy arrays, which loading refuses."""
CHECKPOINT_NAME = re.compile(r"(\d+)-rank(\d+)\.(pt|json)$")
"""A checkpoint's file name: its index, its rank, and ``pt`` (its state) or ``json`` (its description)."""


class CheckpointError(ValueError):
    """A checkpoint's description is not one, or its state is not a checkpoint; one line naming the file."""


@dataclass
class Mark:
    """A checkpoint's description (``<k>-rankN.json``), written after its state (``<k>-rankN.pt``)."""

    index: int
    rank: int
    group: list[int]
    """The ranks that checkpoint together (the strategy's peers)."""
    steps: int
    clock_s: float
    done: bool
    fingerprint: str
    bytes: int
    """The size of the ``.pt`` as written."""
    sha256: str | None = None
    """The sha256 of the ``.pt`` as written (format 2 on)."""
    format: int = 1
    time: float | None = None


@dataclass
class ResumePlan:
    """Where every rank resumes, and the newer checkpoints passed over because their state is damaged."""

    ranks: dict[int, int | None]
    """The checkpoint index each rank continues from (None: from step 0)."""
    skipped: list[str]
    """One line per checkpoint passed over: ``checkpoint 3: 000003-rank0.pt has 1303 bytes, 2606 were written ...``."""
    marks: dict[int, dict[int, Mark]]
    """The descriptions of these settings' checkpoints, by rank and index."""
    folder: Path

    def checkpoint(self) -> dict | None:
        """The checkpoint a resumed run starts from, as its record names it, or None where no rank has one.

        It is rank 0's, or where rank 0 has none the lowest rank's that has one: groups that train apart
        (the class groups of ``label_partitioned``) checkpoint apart, so one may have a checkpoint when
        another has none yet; ``from_start`` lists the ranks that start again from step 0.
        """
        resuming = [rank for rank, index in sorted(self.ranks.items()) if index is not None]
        if not resuming:
            return None
        rank = resuming[0]
        mark = self.marks[rank][self.ranks[rank]]  # type: ignore[index]  # not None: the rank is resuming
        return {
            "index": mark.index,
            "steps": mark.steps,
            "train_s": mark.clock_s,
            "done": mark.done,
            "ranks": len(resuming),
            "rank": rank,
            "from_start": [r for r, index in sorted(self.ranks.items()) if index is None],
            "path": str(checkpoint_path(self.folder, mark.index, rank, "pt")),
        }


def settings_fingerprint(run: Run) -> str:
    """A digest of the run's settings (placement aside): checkpoints resume only the settings that wrote them."""
    return hashlib.sha256(json.dumps(run.settings(), sort_keys=True).encode()).hexdigest()[:16]


def checkpoint_path(folder: Path, index: int, rank: int, suffix: str) -> Path:
    """The state (``pt``) or description (``json``) of checkpoint ``index`` of ``rank`` in ``folder``."""
    return folder / f"{index:06d}-rank{rank}.{suffix}"


def read_mark(path: Path) -> Mark:
    """The description in ``path`` (``<k>-rankN.json``); :class:`CheckpointError` naming it when it is not one."""
    match = CHECKPOINT_NAME.match(path.name)
    assert match and match[3] == "json", f"{path.name} is not named as a checkpoint description"
    remedy = f"delete it and {path.with_suffix('.pt').name}, and --resume continues from the checkpoint before"
    try:
        data = read_json(path, max_bytes=1 << 20)  # bounded: size, nesting, finite numbers
        if not isinstance(data, dict):
            raise SchemaError(f"expected a JSON object, got {type(data).__name__}")
        if not isinstance(data.get("format", 1), int) or data.get("format", 1) > FORMAT:
            raise SchemaError(f"format {data.get('format')!r} is newer than this suite reads ({FORMAT}); update the suite")
        mark = build(Mark, data, "")
    except (OSError, ValueError) as error:  # SchemaError and JsonError are ValueErrors
        reason = error.reason if isinstance(error, JsonError) else error
        raise CheckpointError(f"{path}: not a checkpoint description ({reason}); {remedy}") from None
    if (mark.index, mark.rank) != (int(match[1]), int(match[2])) or mark.rank not in mark.group:
        raise CheckpointError(
            f"{path}: not a checkpoint description (it describes checkpoint {mark.index} of rank {mark.rank} "
            f"in group {mark.group}); {remedy}"
        )
    return mark


def read_marks(run_dir: Path) -> dict[int, dict[int, Mark]]:
    """The description of every checkpoint in the run folder, by rank and index (:class:`CheckpointError`
    naming the first that is not one)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    marks: dict[int, dict[int, Mark]] = {}
    paths = sorted(folder.iterdir()) if folder.is_dir() else []
    for path in paths:
        match = CHECKPOINT_NAME.match(path.name)
        if match and match[3] == "json":
            mark = read_mark(path)
            marks.setdefault(mark.rank, {})[mark.index] = mark
    return marks


def resume_plan(run_dir: Path, run: Run) -> ResumePlan:
    """Where every rank resumes (see the module's rules), verifying the states it would load.

    A group resumes from the latest index that all of its ranks wrote for these settings and
    whose ``.pt`` files have the size and sha256 their descriptions recorded; the newer ones it
    passes over are listed in :attr:`ResumePlan.skipped`. Only the indices tried are hashed.
    """
    folder = Path(run_dir) / CHECKPOINT_DIR
    wanted = settings_fingerprint(run)
    marks = {
        rank: {k: m for k, m in by_index.items() if m.fingerprint == wanted} for rank, by_index in read_marks(run_dir).items()
    }
    problems: dict[tuple[int, int], str | None] = {}

    def problem(rank: int, index: int) -> str | None:
        if (rank, index) not in problems:
            mark = marks[rank][index]
            problems[rank, index] = damage(checkpoint_path(folder, index, rank, "pt"), mark.bytes, mark.sha256)
        return problems[rank, index]

    ranks: dict[int, int | None] = {}
    skipped: list[str] = []
    for rank in range(run.procs):
        ranks[rank] = None
        mine = marks.get(rank)
        if not mine:
            continue
        group = mine[max(mine)].group
        for index in sorted(set.intersection(*(set(marks.get(r, {})) for r in group)), reverse=True):
            damaged = [(r, problem(r, index)) for r in group if problem(r, index) is not None]
            if not damaged:
                ranks[rank] = index
                break
            for r, why in damaged:
                line = f"checkpoint {index}: {checkpoint_path(folder, index, r, 'pt').name} {why}"
                if line not in skipped:
                    skipped.append(line)
    return ResumePlan(ranks, skipped, marks, folder)


def describe_checkpoint(checkpoint: dict | None, skipped: list[str] | None = None) -> str:
    """Where ``--resume`` continues: ``--resume continues from checkpoint 3 (step 40, 12 s of training)``,
    and the damaged checkpoints it skips."""
    passed = f", skipping {'; '.join(skipped)}" if skipped else ""
    if checkpoint is None:
        start = "no intact checkpoint" if skipped else "no checkpoint yet"
        return f"{start}: --resume starts it again from step 0{passed}"
    when = "training over" if checkpoint["done"] else f"step {checkpoint['steps']}"
    whose = f" of rank {checkpoint['rank']}" if checkpoint.get("rank") else ""
    line = f"--resume continues from checkpoint {checkpoint['index']}{whose} ({when}, {checkpoint['train_s']:.0f} s of training)"
    anew = checkpoint.get("from_start") or []
    if anew:
        names = ", ".join(map(str, anew[:8])) + (f" and {len(anew) - 8} more" if len(anew) > 8 else "")
        line += f"; {'rank' if len(anew) == 1 else 'ranks'} {names} {'has' if len(anew) == 1 else 'have'} none yet"
        line += f" and {'starts' if len(anew) == 1 else 'start'} again from step 0"
    return line + passed


def remove_stale(run_dir: Path, plan: dict[int, int | None]) -> None:
    """Remove what no resume will read: checkpoints after a rank's planned one or of other settings,
    temporaries of interrupted writes, and a stop request (call only while no rank writes). Files are removed
    through the folder's descriptor (:func:`suite.records.nofollow.remove_files`): never a file elsewhere."""

    def stale(name: str) -> bool:
        match = CHECKPOINT_NAME.match(name)
        if not match:
            return True  # ".<name>.<random>" temporaries, STOP
        planned = plan.get(int(match[2]))
        return planned is None or int(match[1]) > planned

    remove_files(Path(run_dir) / CHECKPOINT_DIR, stale)
