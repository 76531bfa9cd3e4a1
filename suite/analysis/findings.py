"""What the headline's numbers support: the tested findings on the headline rows
(:func:`suite.analysis.headline.headline_rows`), each one family of tests over every pair of systems on one quantity: the
quality verdicts on the end-of-budget FID by the procedure of :func:`quality_procedure`, the speed verdicts ("learns
faster") on the area under the FID curve (:func:`speed_finding`), timings; the verdict tags each system gets from
them, and ``findings.csv``, every pair's verdict as a row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, cast

import pandas as pd

from ..measure.metrics.signals import UNTRAINED_MARGIN, not_learned
from ..records.record import Record
from . import diversity
from .columns import COL
from .estimand import END_DEFINITION, end_fid, equivalence_margin, seed_policy, speed_definition, speed_fractions
from .headline import HeadlineRow, end_ruler_text, headline_rows
from .markdown import cell
from .stats.power import PairPower, undistinguished_power
from .stats.sequential import Plan, Sequential, sequential_family
from .stats.settling import Scale, budget_scale, quality_scale, speedup_scale
from .stats.summary import Summary, ratio_interval
from .stats.verdicts import Family, compare_all, sentence
from .systems import config_name, contended

TIMING = ("time to target", "speedup")
"""The quantities of the findings that are timings (a busy host weakens them)."""
BUSY_HOST = "‡"
"""The mark of a timing verdict tag of a configuration some of whose runs were timed on a busy host."""
BUDGET_BOUND = "†"
"""The mark of a verdict tag that holds at this budget only (a system in its claims was still improving)."""
EQUAL_BUDGET = "FID at equal budget"
"""The quantity of the equal-budget finding, as the verdict column names it."""


@dataclass(frozen=True)
class Finding:
    """One sentence under the headline; ``family`` is the family of tests it states (None: a sentence that tests nothing)."""

    text: str
    quantity: str
    """What the family ranks, in a few words (``FID``, ``speedup``): the verdict column's name for it."""
    family: Family | None = None
    what: str = ""
    """What the sentence ranks, as it opens (``Final quality (FID, ruler)``)."""
    scale: Scale | None = None
    """At what budget the family's verdict holds, and whether it settled (None: a sentence that tests nothing)."""

    @property
    def power(self) -> list[PairPower]:
        """Per pair not distinguishable, what this run could have detected (from its own spread)."""
        return undistinguished_power(self.family) if self.family is not None else []

    def budget_bound(self, name: str) -> bool:
        """Whether what the family claims of ``name`` holds at this budget only: it, or a system it was found better
        or worse than, was still improving at the end."""
        if self.family is None or self.scale is None:
            return False
        improving = set(self.scale.improving)
        partners = {p.second for p in self.family.claims if p.first == name} | {
            p.first for p in self.family.claims if p.second == name
        }
        return bool(partners) and (name in improving or bool(partners & improving))


Estimate = Callable[[HeadlineRow], Summary | None]
"""One summary of a headline row: the quantity a family compares."""


def _family(rows: list[HeadlineRow], value: Estimate, lower_is_better: bool = True) -> Family | None:
    """Every pair of the rows' ``value`` summaries tested (:func:`compare_all`; None where fewer than two have one)."""
    summaries = {row.config: value(row) for row in rows}
    return compare_all({name: summary for name, summary in summaries.items() if summary is not None}, lower_is_better)


def _ranked(
    rows: list[HeadlineRow],
    family: Family,
    what: str,
    quantity: str,
    records: list[Record],
    scaling: dict[str, pd.DataFrame],
    shown: Callable[[HeadlineRow], str | None] | None = None,
) -> Finding:
    """The finding of ``family``, tested on ``rows``: its sentence (with the rows' ``shown`` text beside each
    estimate), and the caveats of each candidate found better."""
    texts = {row.config: shown(row) for row in rows} if shown else {}
    text = sentence(family, what, shown={name: t for name, t in texts.items() if t} if shown else None)
    named = [family.order[0]] if len(family.order) == 1 else list(dict.fromkeys(p.first for p in family.claims))
    for name in named:
        notes = caveats(next(row for row in rows if row.config == name), records, scaling, quantity in TIMING)
        if notes:
            text += f" Caveat for {name}: {', '.join(notes)}."
    return Finding(text, quantity, family, what)


def caveats(row: HeadlineRow, records: list[Record], scaling: dict[str, pd.DataFrame], timing: bool = False) -> list[str]:
    """What weakens a finding about one configuration (``timing``: of a timing family, which a busy host weakens)."""
    out = []
    main = row.main
    if any(r.oversubscribed for r in main):
        out.append(f"its P={row.top} runs oversubscribe the cores")
    for kind, table in scaling.items():
        part = table[table["config"].str.startswith(row.config)] if not table.empty else table
        if not part.empty and len({t for value in part[COL.threads_per_rank] for t in str(value).split(",")}) > 1:
            out.append(f"threads per rank differ across its {kind} sweep")
    unlearned = [reasons for r in main if r.quality is not None and (reasons := not_learned(r.quality))]
    if unlearned:
        first = "; ".join(unlearned[0])
        draws = "" if len(main) == 1 else f" in {len(unlearned)} of {len(main)} draws"
        out.append(f"its model did not learn{draws} ({first}" + ("; see the warnings" if len(unlearned) > 1 else "") + ")")
    if any(r.budget_s for r in main):
        out.append("time-budgeted runs: speedup compares throughput")
    busy = [r for r in main + row.base if contended(r)] if timing else []
    if busy:
        out.append(f"{len(busy)} of its timed runs ran on a busy host (contended), so its timings measure the host too")
    return out


def _scored(rows: list[HeadlineRow]) -> list[HeadlineRow]:
    return [row for row in rows if row.fid_summary is not None or row.kid_summary is not None]


def _end_unlearned(row: HeadlineRow) -> bool:
    """Whether some draw of ``row`` has no end-of-budget FID, or every draw has one no better than its untrained
    generator's FID (above :data:`~suite.measure.metrics.signals.UNTRAINED_MARGIN` of it, as *has not learned*)."""
    unlearned = 0
    for r in row.main:
        end, untrained = end_fid(r), r.quality.untrained_fid if r.quality is not None else None
        if end is None:
            return True
        unlearned += untrained is not None and end > UNTRAINED_MARGIN * untrained
    return unlearned == len(row.main)


def excluded_from_quality(rows: list[HeadlineRow]) -> set[str]:
    """The headline rows the quality verdicts leave out. Where they compare the end-of-budget FID (every scored row
    has one): a row with a draw without one, or whose every draw ended no better than its untrained generator (a
    system that never learned is named, not tested); a draw that ended no better beside draws that learned is
    compared as what it is, its FID, not left out. Else on the final model's signals (:func:`unlearned_configs`)."""
    scored = _scored(rows)
    if scored and all(row.fid_end_summary is not None for row in scored):
        return {row.config for row in scored if _end_unlearned(row)}
    return unlearned_configs(rows)


def scored_rows(rows: list[HeadlineRow]) -> list[HeadlineRow]:
    """The headline rows the quality verdicts compare: scored, and learned in every draw (:func:`excluded_from_quality`)."""
    excluded = excluded_from_quality(rows)
    return [row for row in _scored(rows) if row.config not in excluded]


def end_rows(scored: list[HeadlineRow]) -> bool:
    """Whether the scored rows are compared on the end-of-budget FID: one ruler, and an end FID for every row."""
    return bool(scored) and len({row.quality for row in scored}) == 1 and all(row.fid_end_summary is not None for row in scored)


def sequential_quality(records: list[Record]) -> Sequential | None:
    """The quality verdicts of ``records`` as the report takes them (:func:`quality_procedure`; None where the
    systems are not compared on the end-of-budget FID): ``suite run`` decides each next block of sequential seeds with it."""
    scored = scored_rows(headline_rows(records, {}))
    return quality_procedure(scored, records) if end_rows(scored) else None


END_FID = "end FID"
"""The quantity of the quality verdicts (:func:`suite.analysis.estimand.end_fid`), as the verdict column names it."""
LEARNS_FASTER = "learns faster"
"""The quantity of the speed verdicts (:func:`suite.analysis.estimand.curve_area`), as the verdict column names it."""


def quality_procedure(rows: list[HeadlineRow], records: list[Record]) -> Sequential | None:
    """The end-of-budget quality verdicts of ``rows`` as the run decided them: sequential seeds replayed where the runs had a
    policy (:mod:`suite.analysis.stats.sequential`), else one look at every seed; every pair better, equivalent
    within the runs' ``metrics.equivalence_margin`` or undecided. ``suite run`` decides its next block with it."""
    main = [r for row in rows for r in row.main]
    policy = seed_policy(main)
    if policy is None:
        draws = {row.config: row.fid_end_draws for row in rows}
        plan = Plan.fixed(max(len(d) for d in draws.values()) if draws else 1)
    else:  # by seed position: a seed that ran but failed is None in its place, so later seeds keep theirs
        plan, draws = Plan(*policy), {row.config: _positions(row, records) for row in rows}
    return sequential_family(draws, plan, True, equivalence_margin(main))


def _positions(row: HeadlineRow, records: list[Record]) -> list[float | None]:
    """A row's end-of-budget FIDs by seed (0, 1, ...), None for a seed whose run at the row's P did not finish ok, up
    to the last seed that ran at all."""
    end = {r.seed: end_fid(r) for r in row.main}
    tried = [r.seed for r in records if config_name(r) == row.config and r.procs == row.top and r.seed is not None]
    return [end.get(seed) for seed in range(max(tried, default=-1) + 1)]


def _end_quality(rows: list[HeadlineRow], ruler: str, records: list[Record], scaling: dict[str, pd.DataFrame]) -> Finding:
    """The quality verdicts: every pair of systems on the end-of-budget FID (:func:`quality_procedure`)."""
    procedure = quality_procedure(rows, records)
    assert procedure is not None, "rows with end FIDs make a family"
    what = f"Quality (end-of-budget FID, {ruler})"
    said = _ranked(rows, procedure.family, what, END_FID, records, scaling)
    definition = f" The estimand, {END_DEFINITION}."
    final = _equivalences_on_the_final_models(rows, procedure.family)
    unfinished = (
        f" The sequential seeds are unfinished: {', '.join(procedure.continuing)} would train another block (a run "
        "stopped early, or runs trained under another decision rule: `suite run` again continues); the verdicts and "
        f"estimates above are those of look {procedure.look}, on the seeds each system had then (n above), which "
        "may be fewer than the headline's."
        if procedure.continuing
        else ""
    )
    return replace(said, text=said.text + final + unfinished + definition)


def _equivalences_on_the_final_models(rows: list[HeadlineRow], family: Family) -> str:
    """For each pair the family found equivalent, the final models' FID ratio with its 95 % interval, and where that
    interval excludes 1, that the final models differ inside the margin: "within 1.5-fold" is not "equal"."""
    by_config = {row.config: row for row in rows}
    said = []
    for pair in family.equivalences:
        a, b = by_config[pair.first].fid_summary, by_config[pair.second].fid_summary
        value, lo, hi = ratio_interval(a, b) if a is not None and b is not None else (None, None, None)
        if value is None or lo is None or hi is None:
            continue
        differ = lo > 1 or hi < 1
        said.append(
            f"{pair.first} over {pair.second} {value:.3g} [{lo:.3g}, {hi:.3g}]"
            + (": they differ, inside the margin" if differ else ": not distinguishable")
        )
    if not said:
        return ""
    return (
        " On the final models' FID (not the estimand; each a 95 % interval, not corrected with the family), the pairs "
        "found equivalent: " + "; ".join(said) + "."
    )


def tested_findings(rows: list[HeadlineRow], records: list[Record], scaling: dict[str, pd.DataFrame]) -> list[Finding]:
    """The headline's findings, each a sentence and the family of tests behind it.

    Each tested finding is one family (:func:`suite.analysis.stats.verdicts.compare_all`): every pair
    of configurations on one quantity, over their draws (seeds for quality and time to quality,
    runs at both ends for speedup), Holm-corrected together. Its sentence gives every estimate, says which
    configuration is better than which where the test found it, and that the other pairs are not
    distinguishable; nothing is inferred from one pair to another.
    """
    if not rows:
        return []
    out: list[Finding] = [f for f in [_time_to_target_finding(rows, records, scaling)] if f is not None]
    unlearned = excluded_from_quality(rows)
    scored = scored_rows(rows)
    rulers = {row.quality for row in scored}
    if end_rows(scored):
        out.append(replace(_end_quality(scored, end_ruler_text(scored), records, scaling), scale=quality_scale(scored)))
    elif scored and len(rulers) == 1:
        fid = all(row.fid_summary is not None for row in scored)
        metric = "FID" if fid else "KID"
        what = f"Final quality ({metric}, {next(iter(rulers))})"
        family = _family(scored, (lambda row: row.fid_summary) if fid else (lambda row: row.kid_summary))
        said = _ranked(scored, family, what, metric, records, scaling) if family else None
        if said:
            out.append(replace(said, scale=quality_scale(scored, "fid" if fid else "kid_mean")))
    elif len(rulers) > 1:
        out.append(
            Finding("Final qualities were measured with different rulers or sample counts and are not compared.", "quality")
        )
    if unlearned:
        out.append(
            Finding(
                "Left out of the quality comparisons, not learned (the final model's signals in the warnings; on the "
                "end-of-budget FID: a draw without one, or every draw no better than its untrained generator's): "
                f"{', '.join(sorted(unlearned))}.",
                "quality",
            )
        )
    at_time = [row for row in rows if row.fid_at_equal_time_summary is not None and row.config not in unlearned]
    # at an equal images budget the FID at its last point is the final model's: the end-of-budget family above is the
    # verdict; equal time stays a family
    moment = end_rows(scored) and bool(rows) and rows[0].equal_axis == "images"
    if len(at_time) > 1 and len(rulers) == 1 and not moment:
        if rows[0].equal_axis == "images":
            budget = f"an equal images budget (FID at the last curve point by {rows[0].equal_time:.0f} images"
        else:
            budget = f"equal training time (FID at the last curve point by {rows[0].equal_time:.0f} s"
        what = f"Quality at {budget}, {next(iter(rulers))})"
        family = _family(at_time, lambda row: row.fid_at_equal_time_summary)
        said = _ranked(at_time, family, what, EQUAL_BUDGET, records, scaling) if family else None
        if said:
            out.append(replace(said, scale=quality_scale(at_time)))
    speed = speed_finding(scored, records, scaling, speed_fractions(r for row in rows for r in row.main))
    found = [speed if len(rulers) == 1 else None, _speedup_finding(rows, records, scaling)]
    return out + _diversity_findings(rows, records, scaling) + [f for f in found if f is not None]


def speed_finding(
    rows: list[HeadlineRow], records: list[Record], scaling: dict[str, pd.DataFrame], grid: tuple[float, ...]
) -> Finding | None:
    """The speed verdicts, a family of its own (not quality): every pair of systems on how fast they learn, the area
    under the log FID curve over the common ``grid`` of budget fractions (:func:`suite.analysis.estimand.curve_area`,
    the headline's, :func:`~suite.analysis.estimand.speed_fractions` of every headline row), over every seed each
    has; None where fewer than two rows have it."""
    family = _family([row for row in rows if row.curve_area_summary is not None], lambda row: row.curve_area_summary)
    if family is None or len(family.order) < 2:
        return None
    ruler = next((row.quality for row in rows if row.quality), "")
    said = _ranked(rows, family, f"Learns faster (area under the FID curve, {ruler})", LEARNS_FASTER, records, scaling)
    return replace(said, text=said.text + f" The estimand, {speed_definition(grid)}.", scale=budget_scale(rows))


def _diversity_findings(rows: list[HeadlineRow], records: list[Record], scaling: dict[str, pd.DataFrame]) -> list[Finding]:
    """The diversity family (:mod:`suite.analysis.diversity`: coverage, higher better), and the systems it leaves out
    as collapsed in every seed."""
    tested = diversity.tested_rows(rows)
    family = _family(tested, diversity.score_summary, lower_is_better=False)
    said = [_ranked(tested, family, diversity.DIVERSITY_WHAT, diversity.DIVERSITY, records, scaling)] if family else []
    gone = diversity.always_collapsed(rows)
    text = f"Collapsed in every seed, not tested: {', '.join(gone)}." if gone else ""
    return [replace(f, scale=budget_scale(tested)) for f in said] + ([Finding(text, "collapse")] if gone else [])


def _time_to_target_finding(rows: list[HeadlineRow], records: list[Record], scaling: dict[str, pd.DataFrame]) -> Finding | None:
    """Every pair of systems on the time to the runs' target, over the draws that reached it (None: the runs set no
    target); where none reached it in every draw, a sentence that says so."""
    target = next((r.time_to_target for r in records if r.status == "ok" and r.time_to_target is not None), None)
    if target is None:
        return None
    goal = f"{target.target:g}" if target.target is not None else "its target"
    metric = str(target.metric or "the score").upper()
    what = f"Time to {metric} <= {goal} ({cell(target.features)}, n={target.n}), seconds of training"
    family = _family(rows, lambda row: row.time_to_target_summary)
    said = _ranked(rows, family, what, "time to target", records, scaling, lambda row: row.time_to_target) if family else None
    missed = [f"{row.config} ({row.target_missed})" for row in rows if isinstance(row.target_missed, str)]
    if said is None:
        return Finding(
            f"No strategy reached {cast(str, target.metric).upper()} <= {target.target:g} in every draw.", "time to target"
        )
    missing = f" Not in every draw: {', '.join(missed)}." if missed else ""
    return Finding(said.text + missing, said.quantity, said.family, said.what, budget_scale(rows))


def _speedup_finding(rows: list[HeadlineRow], records: list[Record], scaling: dict[str, pd.DataFrame]) -> Finding | None:
    """Every pair of systems on the strong-scaling speedup at the largest P that has speedups (None: none has one)."""
    scaled = [row for row in rows if row.speedup_summary is not None]
    if not scaled:
        return None
    top = max(row.top for row in scaled)
    at_top = [row for row in scaled if row.top == top]
    family = _family(at_top, lambda row: row.speedup_summary, lower_is_better=False)
    said = _ranked(at_top, family, f"Strong-scaling speedup at P={top}", "speedup", records, scaling) if family else None
    return replace(said, scale=speedup_scale(at_top, top)) if said else None


def unlearned_configs(rows: list[HeadlineRow]) -> set[str]:
    """The headline rows (configurations) with a model that has not learned in some draw."""
    return {row.config for row in rows if any(r.quality is not None and not_learned(r.quality) for r in row.main)}


def verdicts(
    found: list[Finding], names: Iterable[str], unlearned: Iterable[str] = (), timed: dict[str, list[Record]] | None = None
) -> dict[str, str]:
    """Per configuration, what the tested findings say of it in a few words: the verdict column of the headline.

    ``best Q`` where the family found it better than every other candidate on Q, ``worst Q`` where every
    other was found better, ``Q beats k`` where it was found better than k others (those found better than
    it say so on their own rows), ``Q behind k`` where it beats none; a family that repeats an earlier one
    (:func:`repeats`) is said once. A tag whose claims involve a system still improving at the end of the budget
    ends :data:`BUDGET_BOUND`: it holds at this budget only (:meth:`Finding.budget_bound`). A timing tag of a
    configuration with a run in ``timed`` (its runs, by name) timed on a busy host ends :data:`BUSY_HOST`.
    """
    timed = timed or {}
    kept = [f for f, again in zip(found, repeats(found)) if f.family is not None and not again]
    out = {}
    for name in names:
        tags = ["not learned"] if name in set(unlearned) else []
        tested = False
        for finding in kept:
            quantity, family = finding.quantity, finding.family
            assert family is not None
            if name not in family.order:
                continue
            tested = tested or bool(family.tested)
            others = len(family.order) - 1
            wins = sum(p.first == name for p in family.claims)
            losses = sum(p.second == name for p in family.claims)
            if others and wins == others:
                tag = f"best {quantity}"
            elif others and losses == others:
                tag = f"worst {quantity}"
            elif wins:
                tag = f"{quantity} beats {wins}"
            elif losses:
                tag = f"{quantity} behind {losses}"
            else:
                tag = ""
            same = sum(name in (p.first, p.second) for p in family.equivalences)
            if same and family.margin is not None:
                # "within 1.5x", not "≈": two systems within the margin may still differ inside it
                tag += (", " if tag else f"{quantity} ") + f"within {family.margin:g}x of {same}"
            if not tag:
                continue
            busy = quantity in TIMING and any(contended(r) for r in timed.get(name, []))
            tags.append(tag + (BUDGET_BOUND if finding.budget_bound(name) else "") + (BUSY_HOST if busy else ""))
        out[name] = "; ".join(tags) or ("no difference found" if tested else "not tested")
    return out


def repeats(found: list[Finding]) -> list[bool]:
    """Per finding, whether it is the equal-budget quality and repeats an earlier family: the same candidates and the
    same pairs found different (the budget ended where training ended)."""
    seen = []
    out = []
    for finding in found:
        family = finding.family
        key = (tuple(sorted(family.order)), sorted((p.first, p.second) for p in family.claims)) if family else None
        out.append(finding.quantity == EQUAL_BUDGET and key in seen)
        seen.append(key)
    return out
