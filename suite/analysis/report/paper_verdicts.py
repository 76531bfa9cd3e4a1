"""How a paper's claim is judged on the suite's runs: one system's quality beating another's by Welch's test at 5 %
(:func:`better`), only where every arm learned (:func:`learned`), with the budget it was judged at and who was
still improving there (:func:`scale_note`); a claim needs :data:`MIN_DRAWS` runs per arm."""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Sequence

from ...measure.metrics.signals import UNTRAINED_MARGIN
from ...records.record import Record
from ...records.scored import Quality
from ..stats.pair_tests import welch_p
from ..stats.settling import below_p, last_stretch, seed_curves
from ..stats.summary import ALPHA, Summary, summarise  # ALPHA: the two-sided level behind a claim's verdict

HOLDS, FAILS, UNJUDGED = "holds", "does not hold", "cannot be judged at this scale"
MIN_DRAWS = 3
"""Runs per arm below which a claim is not judged (two draws give a Welch test about 1.3 degrees of freedom)."""


Verdict = tuple[str, str]
"""(verdict, the evidence in a few words)."""


Score = Callable[[Quality], float | None]
"""One score of a quality block (``lambda q: q.fid``)."""


def ok_runs(records: list[Record]) -> list[Record]:
    return [r for r in records if r.status == "ok"]


def run_score(r: Record, score: Score) -> float | None:
    """A run's score (None where it has no quality block)."""
    return score(r.quality) if r.quality is not None else None


def runs_score_summary(records: Sequence[Record], score: Score) -> Summary | None:
    return summarise(run_score(r, score) for r in records)


def summary_words(summary: Summary | None, digits: int = 3) -> str:
    return summary.text(digits) if summary is not None else "not measured"


fid_score: Score = attrgetter("fid")
is_score: Score = attrgetter("is_mean")
tvd_score: Score = attrgetter("tvd")
untrained_fid_score: Score = attrgetter("untrained_fid")


def better(a: Summary | None, b: Summary | None, lower_is_better: bool, what: str) -> Verdict:
    """Whether ``a`` beats ``b`` on one quality (Welch at :data:`ALPHA`), with the two estimates as evidence."""
    evidence = f"{what} {summary_words(a)} against {summary_words(b)}"
    if a is None or b is None:
        return UNJUDGED, f"{evidence}: a side has no scored run"
    if min(a.ns + b.ns) < MIN_DRAWS:
        return UNJUDGED, f"{evidence}: fewer than {MIN_DRAWS} runs per arm"
    p = welch_p(a, b)
    if p is None:
        return UNJUDGED, f"{evidence}: a side has one draw (or none varies), no test"
    ahead = (a.center < b.center) if lower_is_better else (a.center > b.center)
    if p >= ALPHA:
        return UNJUDGED, f"{evidence}: no difference beyond the seeds' spread (Welch p = {p:.2g})"
    return (HOLDS if ahead else FAILS), f"{evidence} (Welch p = {p:.2g})"


def learned(arms: dict[str, list[Record]]) -> str | None:
    """None where every arm's model learned: its FIDs over seeds significantly below ``UNTRAINED_MARGIN`` times its
    untrained generator's (the report's "has not learned" line; a one-sided t-test on log values at :data:`ALPHA`);
    else why the claim cannot be judged."""
    for name, runs in arms.items():
        fids = [run_score(r, fid_score) for r in runs]
        untrained = [run_score(r, untrained_fid_score) for r in runs]
        known = [u for u in untrained if isinstance(u, (int, float)) and u > 0]
        if not known:
            return f"{name} has no untrained FID recorded: whether it learned is not known"
        reference = UNTRAINED_MARGIN * min(known)  # the report's "has not learned" line, tested over the seeds
        p = below_p(fids, reference)
        if p is None or p >= ALPHA:
            tested = f"one-sided t on log values, p = {p:.2g}" if p is not None else "not testable"
            return (
                f"{name} has not learned at this scale: FID {summary_words(summarise(fids))}, not below {UNTRAINED_MARGIN:g} times "
                f"the untrained generator's {min(known):.0f} ({tested})"
            )
    return None


def scale_note(arms: dict[str, list[Record]]) -> str:
    """At what budget a quality claim was judged and whether each arm was still improving there: each arm's FID over
    the last half of its curves (the slope of log FID against log images), a one-sided t over the seeds at :data:`ALPHA`
    (:func:`..stats.settling.last_stretch`)."""
    trends = []
    for name, runs in arms.items():
        draws = seed_curves(runs)
        if draws and (trend := last_stretch(name, draws)) is not None:
            trends.append(trend)
    if not trends:
        return "whether the arms were still improving is not known (fewer than two curve points)"
    budget = f"at {max(t.end for t in trends):,.0f} training images"
    still = [t for t in trends if t.improving]
    if still:
        return f"{budget}, still improving (FID over the last half): {'; '.join(t.text() for t in still)}"
    tested = ", ".join(t.text() for t in trends)
    return f"{budget}, no arm still improving (slope of log FID over the last half, one-sided t at {ALPHA:.0%}: {tested})"


def judged_if_learned(arms: dict[str, list[Record]], verdict: Verdict) -> Verdict:
    """``verdict`` with the budget it was judged at and who was still improving there, unless an arm's model has not
    learned (then it cannot be judged, and the evidence says why)."""
    reason = learned(arms)
    if reason is not None:
        return UNJUDGED, f"{verdict[1]}; {reason}"
    return verdict[0], f"{verdict[1]}; {scale_note(arms)}"
