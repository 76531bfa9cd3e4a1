"""`suite papers`: the records under the folders it is given, by paper (their scenario's name), and one page per paper,
``OUT/<paper>/papers.md``: its printed numbers beside the suite's and one line per claim (:mod:`.papers`: the papers
and their claims)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from ...config.names import current_name
from ...records.nofollow import output_folder
from ...records.record import Record
from ...records.results import RECORD_FILE, RECORDS_FILE, atomic_write_text, read_records
from ..baselines import read_baseline
from ..markdown import cell, markdown_table
from .paper_verdicts import (
    ok_runs,
)
from .papers import PAPERS, Paper


def paper_of(scenario: str | None) -> Paper | None:
    """The paper a scenario's runs belong to, by its name's first part (``paper000-mnist`` -> paper 000; an old name,
    ``seed000-mnist``, as its new one)."""
    return PAPERS.get(current_name(scenario or "").split("-")[0])


def _roots(folder: Path, depth: int = 2) -> list[Path]:
    """The results folders (run folders with a ``result.json``) and report folders (a ``records.json``) at or under
    ``folder``, ``depth`` levels down at most; links are not followed."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    children = sorted(d for d in folder.iterdir() if d.is_dir() and not d.is_symlink())
    if (folder / RECORDS_FILE).is_file() or any((d / RECORD_FILE).is_file() for d in children):
        return [folder]
    return [root for d in children for root in _roots(d, depth - 1)] if depth > 0 else []


def collect(folders: Sequence[Path]) -> dict[str, list[Record]]:
    """The records under ``folders`` by paper key: results folders, report folders (their ``records.json``, so that
    ``suite papers reports/papers`` judges the committed reports again), or folders of either; other runs are left out."""
    by_paper: dict[str, list[Record]] = {}
    for folder in folders:
        for root in _roots(folder):
            for record in read_records(root):
                paper = paper_of(record.scenario)
                if paper is not None:
                    by_paper.setdefault(paper.key, []).append(record)
    return by_paper


def paper_page(paper: Paper, records: list[Record], baselines: Path) -> str:
    """The markdown page of one paper: its numbers beside the suite's, then one line per claim."""
    scenarios = sorted({current_name(r.scenario) if r.scenario is not None else "" for r in records})
    ran = (
        f"Runs of {cell(', '.join(scenarios))}: {len(ok_runs(records))} finished of {len(records)}."
        if records
        else f"No run of this paper's scenarios yet: `{paper.run_with}` runs the reduced ones (scenarios/papers/reduced/)."
    )
    lines = [
        f"# {paper.name.capitalize()}, {paper.title}: its numbers beside the suite's\n",
        f"{ran} The paper's rows come from `baselines/`; a row's `setting` says where the run differs from the paper "
        "(docs/deviations.md lists every difference and assumption).\n",
        "## What the paper prints\n",
    ]
    if paper.printed is not None:
        lines.append(f"From `baselines/{paper.printed}`:\n")
        lines.append(markdown_table(read_baseline(baselines / paper.printed)))
    else:
        lines.append("No number the suite measures: the paper's text is the abstract.\n")
    lines.append("## The suite's runs beside it\n")
    table = paper.numbers(records, baselines, paper.setting) if records else pd.DataFrame()
    lines.append(markdown_table(table) if not table.empty else "No scored run of this paper's systems here.\n")
    lines.append("## Claims\n")
    for claim in paper.claims:
        verdict, evidence = claim.judge(records)
        lines.append(f"- **{verdict}**: {claim.text}. {cell(evidence)}.")  # evidence quotes records
    lines.append("")
    return "\n".join(lines)


def write_papers(folders: Sequence[Path], out: Path, baselines: Path) -> list[Path]:
    """Write ``out/<paper>/papers.md`` for every paper (the runs under ``folders`` beside its numbers); return the pages."""
    by_paper = collect(folders)
    if not by_paper:
        raise FileNotFoundError(
            f"no run of a paper scenario (scenarios/papers/, names paper000-... to paper003-...) under {', '.join(map(str, folders))}"
        )
    written = []
    with output_folder(out):  # never a link at out or in it (out/paper000); nobody else may write there (records.nofollow)
        for key, paper in PAPERS.items():  # a page for every paper: one without runs says how to make them
            path = out / key / "papers.md"
            atomic_write_text(path, paper_page(paper, by_paper.get(key, []), baselines))
            written.append(path)
    return written
