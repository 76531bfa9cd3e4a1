"""Reading a generated report.md back: its tables, the numbers printed in them and in its findings, each
with the system and quantity it belongs to, so that tests can check that a quantity printed twice is
printed the same.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
INTERVAL = re.compile(rf"^({NUMBER}) \[({NUMBER}), ({NUMBER})\](?: \(n=([^)]+)\))?")
"""``estimate [lo, hi] (n=draws)``; the first page's short headline leaves the draws out (said above the table), and a
ratio names both ends' (``n=3 at P=1, 3 at P=2``)."""
ONE_DRAW = re.compile(rf"^({NUMBER}) \(n=1\)")
PLUS_MINUS = re.compile(rf"^({NUMBER}) ± ({NUMBER})")
PLAIN = re.compile(rf"^({NUMBER})$")

ALIASES = {"step_mean": "step_s", "images/s": "images_per_s", "end fid": "fid_end"}
"""Columns that print the same quantity under another name."""
KEY_COLUMNS = {"run_id", "class", "strategy", "config", "procs", "p", "scaling", "seed", "seeds"}
"""Columns that say which system a row is about, never a quantity."""


@dataclass
class Table:
    where: str
    """The heading (and folded summary) above the table."""
    columns: list[str]
    rows: list[dict[str, str]]


@dataclass
class Printed:
    """One number as printed: its centre, and the interval or ± spread beside it, if any."""

    text: str
    where: str
    value: float | None  # None: n/a
    interval: tuple[float, float] | None = None
    n: str | None = None
    """The draws as printed (``3``, ``3 at P=1, 3 at P=2``); None where the cell leaves them out."""
    plus_minus: float | None = None


@dataclass
class Quantities:
    """Every printed number by (system, quantity)."""

    values: dict[tuple, list[Printed]] = field(default_factory=dict)

    def add(self, key: tuple, printed: Printed | None) -> None:
        if printed is not None:
            self.values.setdefault(key, []).append(printed)


def whole_report(report: Path) -> str:
    """``report.md`` and every detail page its index links, in the index's order: the whole report as one text."""
    text = report.read_text()
    pages = re.findall(r"^- \[[^\]]*\]\((details/[^)#]+\.md)\)", text, flags=re.M)
    return "\n".join([text, *((report.parent / page).read_text() for page in pages)])


def tables(text: str) -> list[Table]:
    """Every markdown table of ``text`` with the heading it sits under."""
    out, heading, summary, block = [], "", "", []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if len(block) > 2:
            columns = _cells(block[0])
            rows = [dict(zip(columns, _cells(row))) for row in block[2:]]
            out.append(Table(f"{heading} / {summary}".strip(" /"), columns, rows))
        block = []
        if line.startswith("#"):
            heading, summary = line.lstrip("# ").strip(), ""
        elif "<summary>" in line:
            summary = re.sub(r".*<summary>(.*)</summary>.*", r"\1", line)
    return out


def _cells(line: str) -> list[str]:
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


def parse(text: str, where: str) -> Printed | None:
    """A printed number (``n/a`` included), or None for text that is not one."""
    text = text.strip()
    if text == "n/a":
        return Printed(text, where, None)
    if m := INTERVAL.match(text):
        return Printed(text, where, float(m[1]), (float(m[2]), float(m[3])), m[4])
    if m := ONE_DRAW.match(text):
        return Printed(text, where, float(m[1]), n="1")
    if m := PLUS_MINUS.match(text):
        return Printed(text, where, float(m[1]), plus_minus=float(m[2]))
    if m := PLAIN.match(text):
        return Printed(text, where, float(m[1]))
    return None


def quantity(column: str) -> str:
    """A column's quantity: lower case, without the parenthesised counts (``KID (subsets×n)`` -> ``kid``)."""
    name = re.sub(r"\s*\(.*\)$", "", column).strip().lower()
    return ALIASES.get(name, name)


def unit(text: str) -> float:
    """The value of the last printed digit: 0.001 for ``0.652``, 10 for ``1670``, 1 for ``1673``."""
    mantissa = text.lstrip("-").split("e")[0]
    exponent = int(text.split("e")[1]) if "e" in text else 0
    if "." in mantissa:
        return 10.0 ** (exponent - len(mantissa.split(".")[1]))
    zeros = len(mantissa) - len(mantissa.rstrip("0"))
    return 10.0 ** (exponent + min(zeros, len(mantissa) - 1))


def same_number(a: float, a_text: str, b: float, b_text: str) -> bool:
    """Whether two printed numbers can be roundings of one value."""
    return abs(a - b) <= (unit(a_text) + unit(b_text)) / 2 * (1 + 1e-9)


def _numbers(printed: Printed) -> list[str]:
    return re.findall(NUMBER, printed.text)


def agree(a: Printed, b: Printed) -> str | None:
    """Why two printings of one quantity disagree, or None when they agree."""
    if (a.value is None) != (b.value is None):
        return "n/a in one place only"
    if a.value is None or b.value is None:
        return None
    if (a.plus_minus is not None) != (b.plus_minus is not None) and (a.interval or b.interval):
        return "spread printed in two notations"
    a_numbers, b_numbers = _numbers(a), _numbers(b)
    if not same_number(a.value, a_numbers[0], b.value, b_numbers[0]):
        return "different values"
    if a.interval and b.interval:
        if a.n is not None and b.n is not None and a.n != b.n:
            return "different draws"
        if not all(same_number(x, xt, y, yt) for x, xt, y, yt in zip(a.interval, a_numbers[1:3], b.interval, b_numbers[1:3])):
            return "different intervals"
    return None


def _config(name: str) -> str:
    """A configuration's name without the sweep's grid or block (``... / grid 1x2``)."""
    return re.sub(r" / (grid \d+x\d+|\d+ cells? per rank)$", "", name)


def _top_procs(value: str) -> int:
    return max(int(p) for p in value.split(","))


def _scaling(where: str) -> str | None:
    return "strong" if "Strong scaling" in where else "weak" if "Weak scaling" in where else None


def quantities(text: str) -> Quantities:
    """The numbers of the report's tables keyed by (system, quantity), and those its findings print per system.

    A row is about a run (``run_id``, and ``class`` for per-class rows) or a configuration at a process
    count (``strategy`` and ``P`` of the headline, ``config`` and ``procs`` elsewhere; the headline's
    row is the strong sweep's largest P). Tables whose rows are not one per system (the papers' points,
    the projected pivots) are left out.
    """
    found = Quantities()
    for table in tables(text):
        if "Projection" in table.where and "run_id" not in table.columns:
            continue  # projected numbers per rank count, and the fitted models: not measurements
        keys = [_row_key(table, row) for row in table.rows]
        if None in keys or len(set(keys)) < len(keys):
            continue
        for key, row in zip(keys, table.rows):
            for column, cell in row.items():
                if column.lower() not in KEY_COLUMNS:
                    found.add((key, quantity(column)), parse(cell, table.where))
    headline = next((t for t in tables(text) if t.where == "Headline"), None)
    if headline is not None:
        _finding_quantities(text, headline, found)
    return found


def _row_key(table: Table, row: dict[str, str]) -> tuple | None:
    if "run_id" in row:
        return ("run", row["run_id"], row.get("class"))
    if "strategy" in row and "P" in row:
        return ("config", _config(row["strategy"]), _top_procs(row["P"]), "strong")
    if "config" in row and "procs" in row:
        scaling = row.get("scaling") or _scaling(table.where)
        return ("config", _config(row["config"]), int(row["procs"]), scaling) if scaling else None
    return None


FINDING_TOPICS = {
    "Time to": "time_to_target",
    "Final quality (FID": "fid",
    "Final quality (KID": "kid",
    "Quality (end-of-budget FID": "fid_end",
    "Learns faster": "curve_area",
    "Quality at equal training time": "fid_at_equal_time",
    "Quality at an equal images budget": "fid_at_equal_time",
    "Strong-scaling speedup": "speedup",
}
"""The findings' bullets by the quantity they rank (a bullet names each configuration beside its number)."""


def _finding_quantities(text: str, headline: Table, found: Quantities) -> None:
    configs = {row["strategy"]: _top_procs(row["P"]) for row in headline.rows}
    section = text.split("## Headline", 1)[1].split("\n## ", 1)[0]
    for bullet in (line[2:] for line in section.splitlines() if line.startswith("- ")):
        topic = next((name for start, name in FINDING_TOPICS.items() if start in bullet.split(":")[0]), None)
        if topic is None:
            continue
        for config, procs in configs.items():
            for m in re.finditer(re.escape(config) + r",? (" + NUMBER + r" \[[^\]]*\] \(n=\d+\))", bullet):
                found.add((("config", _config(config), procs, "strong"), topic), parse(m[1], "Headline finding"))


def disagreements(found: Quantities, only: set[str] | None = None, leave_out: set[str] = frozenset()) -> list[str]:
    """One line per (system, quantity) printed differently in two places."""
    out = []
    for (key, name), printed in sorted(found.values.items(), key=str):
        if (only is not None and name not in only) or name in leave_out:
            continue
        first = printed[0]
        for other in printed[1:]:
            reason = agree(first, other)
            if reason:
                out.append(f"{key} {name}: {first.text!r} ({first.where}) vs {other.text!r} ({other.where}): {reason}")
    return out


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
