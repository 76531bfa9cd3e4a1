"""Choose the end-of-budget quality estimand on pilot runs, before the data that tests it.

``RESULTS`` holds pilot runs of the main job's systems on seeds it does not use (``scenarios/estimand-pilot.yaml``:
the tuning seeds 10-12), each run keeping an EMA generator (``train.ema_half_life``) scored on
``metrics.ema_samples`` samples. For every system (strategy / loss / engine at its largest P) and every candidate
estimand of a run's quality:

- the final model's FID on the run's ``metrics.samples`` (the record's ``quality.fid``),
- the final model's FID on the EMA's larger sample count (``generator.pt`` rescored on the common latents),
- the EMA generator's FID on that count (the record's ``quality.ema_fid``),
- the late FID (the geometric mean over the curve points in the last half of the budget),

its spread over seeds (the standard deviation of its log) and its sampling noise: each run's model rescored on
``--latents`` fresh draws of latent vectors and labels, the variance of log FID between draws of one model over
the variance between seeds (its share). Then the validity criterion: for every pair of systems where the final
model's FID decides (Welch's t on log FID over the seeds, two-sided p below ``--alpha``, on either sample count),
whether the candidate points the same way (the sign of its mean log difference). The choice: the first candidate of
an order fixed before the pilot (:data:`PREFERENCE`, the EMA generator first) that agrees on every such pair and
whose sampling noise is a small share of the seed variance; never the one that decides more. Writes ``estimand.md`` and
``estimand.csv`` into ``--out``.

    .venv/bin/python ci/estimand.py results/estimand-pilot --out reports/verdicts
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy import stats

from suite.analysis.estimand import end_fid, late_score
from suite.analysis.systems import main_runs, system_name
from suite.records.record import Record
from suite.records.results import iter_records

FINAL_SMALL, FINAL_LARGE, EMA_LARGE, LATE = "final FID (run's n)", "final FID (EMA's n)", "EMA FID (EMA's n)", "late FID"
CANDIDATES = [FINAL_SMALL, FINAL_LARGE, EMA_LARGE, LATE]
"""The candidate estimands, in the page's order."""
MODEL_FILES = {FINAL_SMALL: "generator.pt", FINAL_LARGE: "generator.pt", EMA_LARGE: "generator_ema.pt"}
"""Each single-model candidate's model file (whose sampling noise is measured)."""


def _n(record: Record, candidate: str) -> int | None:
    """The samples a candidate scores a run's model on (None: the late FID, a mean over the curve)."""
    q = record.quality
    if q is None or candidate == LATE:
        return None
    return q.n if candidate == FINAL_SMALL else q.ema_n


@functools.lru_cache(maxsize=8)
def _ruler(dataset: str, image_size: int, classes: tuple[int, ...] | None, n: int) -> tuple[Any, Any]:
    """The run's ruler at ``n`` samples, loaded once per sample count."""
    from suite.measure.metrics.reference import Reference

    ref = Reference(
        dataset=dataset, image_size=image_size, classes=list(classes) if classes else None, features="classifier", n=n
    )
    return ref, ref.networks()


def rescore(record: Record, folder: Path, name: str, n: int, seeds: list[int]) -> list[float | None]:
    """FID of the run's model file ``name`` on ``n`` samples of each latent seed (``COMMON_LATENTS_SEED`` the common
    ones), with the run's ruler: the FID alone (the full quality block's per-class scores and KID are not needed; the
    run's-n final FID on the common latents checks that it equals the record's)."""
    from suite.gan.sampling import Sampler, load_model
    from suite.measure.metrics.evaluate import protocol_images, real_statistics
    from suite.measure.metrics.scores import frechet_distance, statistics

    assert record.dataset is not None, "a scored run names its dataset"
    bundle = load_model(folder, name)
    classes = tuple(record.dataset.classes) if record.dataset.classes else None
    ref, (net, _) = _ruler(record.dataset.name, bundle.image_size, classes, n)
    real, sampler, fids = real_statistics(ref, net), Sampler(bundle), []
    for seed in seeds:
        images, _ = sampler.sample(n, seed=seed)
        features, _ = net(protocol_images(images, ref.protocol))
        fids.append(float(frechet_distance(*statistics(features), real["mu"], real["sigma"])))
    print(f"  {folder.name}/{name}: n {n}, seeds {seeds}: {[round(f, 2) for f in fids]}", flush=True)
    return fids


def run_values(record: Record, folder: Path, latents: int) -> dict[str, dict[str, float | None]]:
    """Every candidate's value on one run, and (single models) the variance of its log over fresh latents."""
    from suite.measure.metrics.evaluate import COMMON_LATENTS_SEED

    q = record.quality
    assert q is not None, "a pilot run is scored"
    values = {FINAL_SMALL: q.fid, EMA_LARGE: end_fid(record), LATE: late_score(record)}
    noise: dict[str, float | None] = {LATE: None}
    for candidate, name in MODEL_FILES.items():
        n = _n(record, candidate)
        if n is None:
            values.setdefault(candidate, None)
            noise[candidate] = None
            continue
        # the common latents again where the record does not hold the score (the larger-n final FID), or where a
        # rescoring is cheap (the run's n): the check that this is the run's ruler
        recheck = candidate != EMA_LARGE
        if not recheck and latents < 2:  # the record holds its value; no noise measured on this run
            noise[candidate] = None
            continue
        draws = list(range(1, latents + 1)) if latents > 1 else []
        scores = rescore(record, folder, name, n, [COMMON_LATENTS_SEED] * recheck + draws)
        common = scores[0] if recheck else values[candidate]
        fresh = [s for s in scores[int(recheck) :] if s is not None and s > 0]
        if candidate == FINAL_LARGE:
            values[candidate] = common
        elif common is None or values[candidate] is None or abs(common - values[candidate]) > 1e-6 * common:
            raise SystemExit(
                f"{folder}: rescoring {name} on the common latents gives FID {common}, the record {values[candidate]}"
            )
        noise[candidate] = float(np.var(np.log(fresh), ddof=1)) if len(fresh) > 1 else None
    return {"value": values, "noise": noise}


def measure(
    results: Path,
    latents: int,
    done: pd.DataFrame | None = None,
    noise_seeds: set[int] | None = None,
    progress: Path | None = None,
) -> pd.DataFrame:
    """One row per run and candidate: system, seed, value, and the variance of its log over fresh latents (on the runs
    of ``noise_seeds``, default all; the runs in ``done``, an earlier measurement, kept as they are)."""
    records = [r for r in iter_records(results, skip_bad=True) if r.status == "ok"]
    by_system: dict[str, list[Record]] = {}
    for r in records:
        by_system.setdefault(system_name(r), []).append(r)
    kept = set() if done is None else set(zip(done.system, done.seed))
    rows = [] if done is None else done.to_dict("records")
    for name, runs in sorted(by_system.items()):
        for r in sorted(main_runs(runs)[0], key=lambda r: r.seed or 0):
            if (name, r.seed) in kept:
                continue
            got = run_values(r, results / str(r.run_id), latents if noise_seeds is None or r.seed in noise_seeds else 0)
            for candidate in CANDIDATES:
                rows.append(
                    {
                        "system": name,
                        "seed": r.seed,
                        "candidate": candidate,
                        "value": got["value"][candidate],
                        "n": _n(r, candidate),
                        "latent_variance": got["noise"][candidate],
                        "ema_half_life": _half_life(r),
                    }
                )
            print(name, r.seed, {c: got["value"][c] for c in CANDIDATES}, flush=True)
            if progress is not None:  # what is measured so far, for --resume after an interruption
                progress.parent.mkdir(parents=True, exist_ok=True)
                pd.DataFrame(rows).to_csv(progress, index=False)
    return pd.DataFrame(rows)


def _half_life(record: Record) -> float | None:
    from suite.records.record import run_setting

    value = run_setting(record, "train", "ema_half_life")
    return float(value) if isinstance(value, (int, float)) else None


def logs(table: pd.DataFrame, candidate: str) -> dict[str, np.ndarray]:
    """Each system's log values of ``candidate`` over its seeds (seeds in order; missing values dropped)."""
    part = table[(table.candidate == candidate) & table.value.notna() & (table.value > 0)].sort_values("seed")
    return {system: np.log(group.value.to_numpy(float)) for system, group in part.groupby("system")}


def decided_pairs(table: pd.DataFrame, alpha: float) -> dict[tuple[str, str], float]:
    """The pairs where the final model's FID decides (Welch on log FID, p < ``alpha`` on either sample count): the
    sign of their mean log difference (first minus second)."""
    decided: dict[tuple[str, str], float] = {}
    for candidate in (FINAL_SMALL, FINAL_LARGE):
        values = logs(table, candidate)
        for a, b in itertools.combinations(sorted(values), 2):
            x, y = values[a], values[b]
            if len(x) > 1 and len(y) > 1 and stats.ttest_ind(x, y, equal_var=False).pvalue < alpha:
                sign = float(np.sign(x.mean() - y.mean()))
                if decided.get((a, b), sign) != sign:  # the two counts disagree: not decided
                    decided[(a, b)] = 0.0
                else:
                    decided[(a, b)] = sign
    return {pair: sign for pair, sign in decided.items() if sign}


def summary(table: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """One row per candidate: seed spread (root mean square over systems), sampling share, and agreement in direction
    with the final model's FID (on the pairs it decides, and on every pair against the larger-n final FID)."""
    decided = decided_pairs(table, alpha)
    reference = {k: v.mean() for k, v in logs(table, FINAL_LARGE).items()}
    rows = []
    for candidate in CANDIDATES:
        values = logs(table, candidate)
        spreads = {s: float(np.std(v, ddof=1)) for s, v in values.items() if len(v) > 1}
        noise = table[(table.candidate == candidate)].groupby("system").latent_variance.mean()
        shares = {s: float(noise[s]) / spreads[s] ** 2 for s in spreads if s in noise and pd.notna(noise[s]) and spreads[s] > 0}
        means = {s: v.mean() for s, v in values.items()}
        agree = [np.sign(means[a] - means[b]) == sign for (a, b), sign in decided.items() if a in means and b in means]
        pairs = [(a, b) for a, b in itertools.combinations(sorted(reference), 2) if a in means and b in means]
        same = [np.sign(means[a] - means[b]) == np.sign(reference[a] - reference[b]) for a, b in pairs]
        rows.append(
            {
                "candidate": candidate,
                "spread_rms": math.sqrt(np.mean([v**2 for v in spreads.values()])) if spreads else math.nan,
                "sampling_share_mean": float(np.mean(list(shares.values()))) if shares else math.nan,
                "sampling_share_max": float(np.max(list(shares.values()))) if shares else math.nan,
                "decided_pairs": len(decided),
                "agrees_on_decided": int(sum(agree)),
                "valid": len(agree) == len(decided) and all(agree),
                "same_direction_pairs": int(sum(same)),
                "pairs": len(pairs),
            }
        )
    return pd.DataFrame(rows)


PREFERENCE = [EMA_LARGE, FINAL_LARGE, FINAL_SMALL, LATE]
"""The order fixed before the pilot: the EMA generator (the model a run ends with, steady by construction), the final
model on as many samples, on the run's samples, the late FID. The pilot only checks them."""
MAX_SAMPLING_SHARE = 0.5
"""A candidate's sampling noise may be at most this share of the seed variance (mean over the systems)."""


def choose(summary_table: pd.DataFrame) -> str:
    """The first candidate of :data:`PREFERENCE` that is valid (agrees with the final model's FID on every pair it
    decides) and whose sampling noise is at most :data:`MAX_SAMPLING_SHARE` of the seed variance: pass or fail
    checks of an order fixed in advance, never a search for the candidate that decides most."""
    rows = summary_table.set_index("candidate")
    for candidate in PREFERENCE:
        row = rows.loc[candidate]
        share = row.sampling_share_mean
        if row.valid and (pd.isna(share) and candidate == LATE or share <= MAX_SAMPLING_SHARE):
            return candidate
    raise SystemExit("no candidate agrees with the final model's FID on every pair it decides with little sampling noise")


def _fmt(value: float, pattern: str = "{:.3f}") -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else pattern.format(value)


def _per_system(table: pd.DataFrame, column: Callable[[np.ndarray, str, str], str]) -> list[str]:
    """A table with a row per system and a column per candidate, each cell ``column(logs, system, candidate)``."""
    systems = sorted(table.system.unique())
    lines = ["| system | seeds | " + " | ".join(CANDIDATES) + " |", "|---|---|" + "---|" * len(CANDIDATES)]
    values = {c: logs(table, c) for c in CANDIDATES}
    for s in systems:
        seeds = ", ".join(str(int(x)) for x in sorted(table[table.system == s].seed.unique()))
        lines.append(f"| {s} | {seeds} | " + " | ".join(column(values[c].get(s, np.array([])), s, c) for c in CANDIDATES) + " |")
    return lines


def _validity(table: pd.DataFrame, decided: dict[tuple[str, str], float]) -> list[str]:
    """The validity table: each pair the final FID decides, and whether each candidate points the same way."""
    lines: list[str] = []
    if decided:
        lines += [
            "| pair A vs B | A's final FID | " + " | ".join(CANDIDATES) + " |",
            "|---|---|" + "---|" * len(CANDIDATES),
        ]
        for (a, b), sign in decided.items():
            cells = []
            for c in CANDIDATES:
                v = logs(table, c)
                if a in v and b in v:
                    d = v[a].mean() - v[b].mean()
                    cells.append(("agrees" if np.sign(d) == sign else "**disagrees**") + f" ({math.exp(d):.2f})")
                else:
                    cells.append("n/a")
            lines.append(f"| {a} vs {b} | {'lower' if sign < 0 else 'higher'} | " + " | ".join(cells) + " |")
    else:
        lines.append(
            "No pair is decided by the final model's FID at these seeds: validity is then read from the direction on every pair (below)."
        )
    return lines


def _discordant(table: pd.DataFrame, chosen: str) -> list[str]:
    """A line naming the pairs (none decided by the final FID) where ``chosen`` points the other way from the final
    model's FID on as many samples: what the main job's verdicts on those pairs rest on."""
    ours, final = ({k: v.mean() for k, v in logs(table, c).items()} for c in (chosen, FINAL_LARGE))
    pairs = [
        f"{a} vs {b} (final {math.exp(final[a] - final[b]):.2f}, {chosen} {math.exp(ours[a] - ours[b]):.2f})"
        for a, b in itertools.combinations(sorted(final), 2)
        if a in ours and b in ours and np.sign(ours[a] - ours[b]) != np.sign(final[a] - final[b])
    ]
    if not pairs:
        return []
    return [
        f"- Where the final FID decides nothing, {chosen} points the other way on {len(pairs)} pair(s): "
        + "; ".join(pairs)
        + ". There the end-of-budget verdict rests on the averaged model, not the last one: the main job's first page "
        "should not call such a pair decided by the final models."
    ]


def _notes(half_lives: list[float]) -> list[str]:
    """The page's notes on what was not measured and on the late FID."""
    return [
        f"- Measured at one EMA setting (half-life {', '.join(f'{h:g}' for h in half_lives)}); the label-partitioned "
        "GANs make 12 steps each, so a half-life of a tenth of them is about one step, and their averages lag a model "
        "still improving. Another half-life is another pilot (`--set train.ema_half_life=...`), measured the same way "
        "before any main-job run.",
        "- The late FID measures how a system spent the last half of its budget, not the model it ends with: a system "
        "still improving steeply is charged for where it was at half the budget. It stays a speed figure.",
    ]


def markdown(table: pd.DataFrame, alpha: float, command: str) -> str:
    """The page: values, spreads, sampling shares, the validity check on decided pairs, and the choice."""
    result = summary(table, alpha)
    chosen = choose(result)
    decided = decided_pairs(table, alpha)
    seeds = sorted(int(s) for s in table.seed.unique())
    half_lives = sorted({float(h) for h in table.get("ema_half_life", pd.Series(dtype=float)).dropna()})
    ema_n = sorted({int(n) for n in table[table.candidate == EMA_LARGE].get("n", pd.Series(dtype=float)).dropna()})
    noise = table.groupby(["system", "candidate"]).latent_variance.mean()
    noisy = sorted(int(x) for x in table[table.latent_variance.notna()].seed.unique())

    def gm(v: np.ndarray, s: str, c: str) -> str:
        return (
            _fmt(float(np.exp(v.mean())) if len(v) else math.nan, "{:.0f}")
            + " ("
            + _fmt(float(np.std(v, ddof=1)) if len(v) > 1 else math.nan, "{:.2f}")
            + ")"
        )

    def share(v: np.ndarray, s: str, c: str) -> str:
        var = noise.get((s, c), math.nan)
        return _fmt(100 * var / np.var(v, ddof=1) if len(v) > 1 and pd.notna(var) else math.nan, "{:.0f} %")

    lines = [
        "# The end-of-budget quality estimand, chosen on pilot runs",
        "",
        f"Measured by `ci/estimand.py` on pilot runs of the main job's five systems (`scenarios/estimand-pilot.yaml`: "
        f"its learning rates, budget of 3,840 images and ruler, at 2 processes) on the **tuning seeds {', '.join(map(str, seeds))}**, "
        "not the main job's seeds 0-5. The choice below was **fixed before the main job's runs**, which then test it; "
        f"each pilot run kept an EMA generator (half-life {', '.join(f'{h:g}' for h in half_lives)} of its generator steps, "
        f"`train.ema_half_life`) scored on {', '.join(map(str, ema_n))} samples of the common latents (`metrics.ema_samples`).",
        "",
        "## Each candidate by system: geometric mean over seeds (standard deviation of log)",
        "",
        *_per_system(table, gm),
        "",
        "## Sampling noise: variance of log FID between fresh latent draws of one model, over the variance between seeds",
        "",
        f"Fresh draws on the runs of seed{'s' if len(noisy) > 1 else ''} {', '.join(map(str, noisy))} "
        "(the variance between draws averaged over those runs); the late FID averages its points' draws and is not "
        "rescored.",
        "",
        *_per_system(table, share),
        "",
        f"## Validity: agreement in direction with the final model's FID where it decides (Welch on log FID, p < {alpha})",
        "",
    ]
    lines += _validity(table, decided)
    lines += [
        "",
        "## Summary",
        "",
        "| candidate | seed spread (rms over systems) | sampling share (mean, max) | agrees on decided pairs | same direction as the final FID (EMA's n), all pairs | valid |",
        "|---|---|---|---|---|---|",
    ]
    for _, row in result.iterrows():
        lines.append(
            f"| {row.candidate} | {_fmt(row.spread_rms)} | {_fmt(100 * row.sampling_share_mean, '{:.0f} %')}, {_fmt(100 * row.sampling_share_max, '{:.0f} %')} | "
            f"{row.agrees_on_decided} of {row.decided_pairs} | {row.same_direction_pairs} of {row.pairs} | {'yes' if row.valid else 'no'} |"
        )
    pick = result.set_index("candidate").loc[chosen]
    lines += [
        "",
        "## Choice",
        "",
        f"- **{chosen}**: the first of the order fixed before the pilot ({', '.join(PREFERENCE)}) that agrees in "
        f"direction with the final model's FID on every pair that FID decides ({pick.agrees_on_decided} of "
        f"{pick.decided_pairs}; {pick.same_direction_pairs} of {pick.pairs} pairs point the way the final model's FID "
        "on as many samples does) and whose sampling noise is at most "
        f"{100 * MAX_SAMPLING_SHARE:.0f} % of the seed variance ({_fmt(100 * pick.sampling_share_mean, '{:.0f} %')} on average "
        "over the systems). Pass-or-fail checks of a fixed order: never the candidate that would decide most.",
        *_discordant(table, chosen),
        "- The suite reads it through `suite/analysis/estimand.py::end_fid` (one definition); `scenarios/digits.yaml` "
        "keeps the pilot's EMA half-life and sample count.",
        *_notes(half_lives),
        "",
        f"Rerun: `{command}` (`--collect-only` rewrites this page from `estimand.csv`).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a results folder of pilot runs (run folders with their generators)")
    parser.add_argument("--latents", type=int, default=5, help="fresh latent draws per model (default 5)")
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="the level at which the final FID decides a pair (default 0.05)"
    )
    parser.add_argument("--noise-seeds", type=int, nargs="*", help="measure sampling noise on these seeds' runs only")
    parser.add_argument("--out", default="reports/verdicts", help="where estimand.md and .csv go")
    parser.add_argument("--collect-only", action="store_true", help="rewrite estimand.md from the estimand.csv in --out")
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs the estimand.csv in --out measured; measure the others"
    )
    args = parser.parse_args()
    out = Path(args.out)
    earlier = (
        pd.read_csv(out / "estimand.csv") if (args.collect_only or args.resume) and (out / "estimand.csv").is_file() else None
    )
    table = (
        earlier
        if args.collect_only and earlier is not None
        else measure(
            Path(args.results), args.latents, earlier, set(args.noise_seeds) if args.noise_seeds else None, out / "estimand.csv"
        )
    )
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "estimand.csv", index=False)
    command = ".venv/bin/python ci/estimand.py " + shlex.join(a for a in sys.argv[1:] if a not in ("--collect-only", "--resume"))
    (out / "estimand.md").write_text(markdown(table, args.alpha, command))
    print((out / "estimand.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
