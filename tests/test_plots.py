"""The report's figures: one look per system across figures, bands over seeds, sample grids, and no crash on missing data."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import matplotlib.colors as mcolors
import pandas as pd
import pytest
import torch
from matplotlib.collections import PolyCollection
from PIL import Image

from conftest import run_scenario, tiny_scenario
from suite.analysis.palette import OKABE_ITO, style, style_of
from suite.analysis.plot_parts import MAX_TICKS, log_ticks, pyplot, tick_text
from suite.analysis.plots import (
    by_config,
    losses_figure,
    one_per_seed,
    plot_losses,
    plot_quality_curves,
    plot_scaling,
    quality_figure,
)
from suite.analysis.run_plots import plot_rank_timeline, plot_samples_over_time
from suite.gan.data import load_dataset
from suite.gan.grids import PER_ROW, grid_scale, save_training_grids
from suite.gan.models import Generator
from suite.gan.sampling import GeneratorBundle
from suite.records.codec import parse_record
from suite.records.record import Record
from suite.records.results import REAL_GRID_FILE, SAMPLE_GRIDS_DIR, grid_rows, new_record, sample_grid_file


def record(strategy: str, loss: str, engine: str, seed: int, fids: list[float]) -> dict:
    """An ok run at P=2 with a quality curve (one point per FID) and a loss history."""
    return {
        "run_id": f"{strategy}-{loss}-{engine}-s{seed}",
        "status": "ok",
        "strategy": strategy,
        "loss": loss,
        "engine": engine,
        "label": None,
        "sweep": None,
        "scaling": "strong",
        "procs": 2,
        "seed": seed,
        "repeat": 0,
        "curve": [
            {"clock_s": 5.0 * i, "step": 10 * i, "images": 320 * i, "fid": fid, "features": "classifier:digits", "n": 500}
            for i, fid in enumerate(fids)
        ],
        "history": [{"step": 10 * i, "d_loss": 0.6 + 0.01 * seed, "g_loss": 0.8 - 0.01 * i} for i in range(len(fids))],
        "generator_steps": 10 * (len(fids) - 1),
        "train_images": 320 * (len(fids) - 1),
    }


ROOT = Path(__file__).resolve().parent.parent

SYSTEMS = [("conditional", "bce", "horovod"), ("label_partitioned", "wgan-gp", "mpi"), ("data_parallel", "bce", "horovod")]


def records_for(seeds: list[int]) -> list[Record]:
    return [
        new_record(record(s, loss, e, seed, [300.0 - 10 * seed, 200.0 + seed, 100.0 + 2 * seed]))
        for s, loss, e in SYSTEMS
        for seed in seeds
    ]


def line_colours(fig) -> dict[str, str]:
    """The colour of each labelled line of a figure, by the system its label starts with."""
    colours = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            label = line.get_label()
            if not label.startswith("_") and " / " in label:
                colours[" / ".join(label.split(" / ")[:2])] = mcolors.to_hex(line.get_color())
    return colours


def test_a_system_has_one_colour_in_every_figure_whatever_the_order():
    records = records_for([0, 1])
    quality, _ = quality_figure(records)
    losses = losses_figure(list(reversed(records)))  # drawn in the other order
    plt = pyplot()
    first, second = line_colours(quality), line_colours(losses)
    plt.close(quality), plt.close(losses)
    assert set(first) == {"conditional / bce", "label_partitioned / wgan-gp", "data_parallel / bce"}
    assert first == second
    assert len(set(first.values())) == 3  # three systems, three colours
    # the colour is the system's Okabe-Ito colour (strategy and loss, by registry position); the loss sets marker and line
    assert first["data_parallel / bce"] == OKABE_ITO[0].lower()
    lp_bce, lp_wgan = style("label_partitioned", "bce", "mpi"), style("label_partitioned", "wgan-gp", "mpi")
    assert lp_bce.color != lp_wgan.color and lp_bce.marker != lp_wgan.marker
    main_job = [("data_parallel", "bce", "horovod"), ("conditional", "bce", "horovod"), ("label_partitioned", "bce", "mpi")]
    main_job += [("label_partitioned", "wgan-gp", "mpi"), ("cellular", "mustangs", "mpi")]
    looks = [style(*system) for system in main_job]
    assert len({look.color for look in looks}) == 5 and len({look.marker for look in looks}) == 5  # five systems apart
    assert "#f0e442" not in {look.color for look in looks}  # Okabe-Ito's yellow: too pale on white
    assert style_of("cellular / mustangs / mpi / grid 1x2") == style("cellular", "mustangs", "mpi")
    assert style_of("cellular / mustangs / mpi (digits 20px, 1 thread, cpu)") == style("cellular", "mustangs", "mpi")


@pytest.mark.parametrize("seeds, bands", [([0, 1], 3), ([0], 0)])
def test_a_band_is_drawn_where_there_are_two_seeds_or_more(seeds, bands):
    fig, name = quality_figure(records_for(seeds))
    drawn = sum(isinstance(c, PolyCollection) for c in fig.axes[0].collections)
    labels = [line.get_label() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")]
    pyplot().close(fig)
    assert drawn == bands
    assert name == "quality_vs_time_classifier-digits.png"
    assert f"conditional / bce / horovod, P=2 ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})" in labels


def test_the_mean_line_is_the_geometric_mean_over_seeds():
    fig, _ = quality_figure(records_for([0, 1]))
    line = next(x for x in fig.axes[0].get_lines() if x.get_label().startswith("conditional"))
    pyplot().close(fig)
    assert list(line.get_ydata()) == pytest.approx([(300.0 * 290.0) ** 0.5, (200.0 * 201.0) ** 0.5, (100.0 * 102.0) ** 0.5])


def test_every_plot_says_why_and_draws_nothing_without_data(tmp_path, caplog):
    import pandas as pd

    no_history = [dataclasses.replace(r, history=None, curve=None) for r in records_for([0])]
    caplog.set_level("INFO", logger="suite.analysis.plot_parts")
    assert plot_scaling(pd.DataFrame(columns=["config", "procs"]), "strong", tmp_path) == []
    assert plot_quality_curves(no_history, tmp_path) == []
    assert plot_losses(no_history, tmp_path) == []
    assert plot_samples_over_time(records_for([0]), tmp_path, tmp_path) == []
    assert plot_rank_timeline(records_for([0]), tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    assert len(caplog.records) == 5 and all("not drawn" in r.getMessage() for r in caplog.records)


def _bundle(conditional: bool) -> GeneratorBundle:
    torch.manual_seed(0)
    net = Generator(20, 1, 8, 10 if conditional else 0)
    return GeneratorBundle(
        kind="single",
        image_size=20,
        channels=1,
        latent_dim=8,
        num_classes=10,
        conditional=conditional,
        generators={"all": net.state_dict()},
        class_prior={c: 0.1 for c in range(10)},
    )


@pytest.mark.parametrize("conditional", [True, False])
def test_training_grids_are_pngs_by_class(tmp_path, conditional):
    data = load_dataset("digits", image_size=20)
    bundle = _bundle(conditional)
    written = save_training_grids(tmp_path, [(1.0, 4, 128, bundle)], (9, bundle), data, seed=0)
    folder = tmp_path / SAMPLE_GRIDS_DIR
    assert written == [folder / sample_grid_file(4), folder / sample_grid_file(9), folder / REAL_GRID_FILE]
    side = ((20 + 2) * PER_ROW + 2) * grid_scale(20)
    for path in written:
        with Image.open(path) as picture:
            assert picture.format == "PNG" and picture.size == (side, side)
    assert grid_rows(folder / REAL_GRID_FILE) == list(range(10))
    assert grid_rows(folder / sample_grid_file(9)) == (list(range(10)) if conditional else None)


@pytest.mark.multiproc
def test_a_short_run_saves_its_sample_grids_and_the_report_shows_them(tmp_path):
    scenario = tiny_scenario(
        "grids",
        [{"strategy": "conditional", "engine": "horovod", "procs": [1]}],
        train={"steps": 4},
        metrics={"curve_points": 2},
    )
    code, records = run_scenario(tmp_path, scenario)
    assert code == 0
    (run_id,) = records
    folder = tmp_path / "results" / run_id / SAMPLE_GRIDS_DIR
    names = sorted(p.name for p in folder.iterdir())
    assert names[-1] == "step_00000004.png" and REAL_GRID_FILE in names and len(names) >= 3
    with Image.open(folder / names[-1]) as picture:
        assert picture.format == "PNG" and picture.size == (((20 + 2) * PER_ROW + 2) * grid_scale(20),) * 2
    typed = [parse_record(r) for r in records.values()]
    assert plot_samples_over_time(typed, tmp_path / "results", tmp_path) == ["samples_over_time.png"]


# --- every figure's ticks read (issue 54) -------------------------------------------------------------------------

MAX_LABEL = 8
"""Characters a tick label may have (a plain number or a short word; never ``7.27149x10^-1``)."""


def tick_problems(fig) -> list[str]:
    """What makes ``fig``'s tick labels hard to read, drawn as saved: a log (symlog) axis with fewer than three labelled
    ticks inside its limits, labels of one axis that overlap, a label longer than :data:`MAX_LABEL` characters."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    for n, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        for which, axis, at in (("x", ax.xaxis, 0), ("y", ax.yaxis, 1)):
            lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
            slack = (hi - lo) * 1e-6
            labels = [
                t
                for t in axis.get_ticklabels(which="both")
                if t.get_visible() and t.get_text().strip() and lo - slack <= t.get_position()[at] <= hi + slack
            ]
            shared = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
            if not labels and len(shared.get_siblings(ax)) > 1:
                continue  # a panel beside another with the same axis, whose labels it reads
            where = f"axes {n} ({ax.get_title() or ax.get_xlabel()!r}) {which}"
            texts = [t.get_text() for t in labels]
            if axis.get_scale() in ("log", "symlog") and len(labels) < 3:
                problems.append(f"{where}: {len(labels)} labelled ticks on a {axis.get_scale()} axis: {texts}")
            problems += [f"{where}: label {t!r} longer than {MAX_LABEL}" for t in texts if len(t) > MAX_LABEL]
            boxes = [t.get_window_extent(renderer) for t in labels]
            problems += [
                f"{where}: labels {texts[i]!r} and {texts[j]!r} overlap"
                for i in range(len(boxes))
                for j in range(i + 1, len(boxes))
                if boxes[i].overlaps(boxes[j])
            ]
    return problems


@dataclasses.dataclass
class Saved:
    """A figure as it was saved: its tick problems (:func:`tick_problems`), its axes' titles and its texts."""

    problems: list[str]
    titles: list[str]
    texts: list[str]


@pytest.fixture
def saved_figures(monkeypatch) -> dict[str, Saved]:
    """Every figure saved while the test runs, by file name, read as it is saved."""
    from matplotlib.figure import Figure

    seen: dict[str, Saved] = {}
    original = Figure.savefig

    def savefig(fig, target, *args, **kwargs):
        name = Path(str(target)).name
        staged = re.fullmatch(r"\.(.+)\.[0-9a-f]{8}\.png", name)  # suite.records.results.atomic_write's temporary
        seen[staged.group(1) if staged else name] = Saved(
            tick_problems(fig), [ax.get_title() for ax in fig.axes], [t.get_text() for ax in fig.axes for t in ax.texts]
        )
        return original(fig, target, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def _digits_records() -> list[dict]:
    """The committed example report's records, with two P=1 runs of one system made far apart: a speedup interval of
    two runs at each end then spans orders of magnitude (Student's t with one degree of freedom)."""
    records = json.loads((ROOT / "reports" / "digits" / "records.json").read_text())
    ones = [r for r in records if r["status"] == "ok" and r["run_id"].startswith("conditional-bce-horovod-p1-")]
    records = [r for r in records if r not in ones[2:]]
    ones[0]["train_s"], ones[1]["train_s"] = ones[0]["train_s"] / 30, ones[1]["train_s"] * 30
    return records


def _grids_for(results: Path, records: list[Record]) -> None:
    """Sample grids (plain grey squares) in the run folders the samples figure reads: at every curve point's step."""
    for runs in by_config(records).values():
        run = one_per_seed(runs)[0]
        folder = results / str(run.run_id) / SAMPLE_GRIDS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for i, point in enumerate([None, *(run.curve or [])]):
            name = REAL_GRID_FILE if point is None else sample_grid_file(int(point.step or 0))
            Image.new("L", (60, 60), 40 * i % 255).save(folder / name)


def test_every_figure_the_report_writes_labels_enough_ticks_that_do_not_overlap(tmp_path, saved_figures):
    from suite.analysis.report import write_report
    from suite.records.results import write_record

    records = [new_record(r) for r in _digits_records()]
    for r in records:
        write_record(tmp_path / "results" / str(r.run_id), r)
    _grids_for(tmp_path / "results", records)
    write_report(tmp_path / "results", tmp_path / "report")
    written = sorted(p.name for p in (tmp_path / "report").glob("*.png"))
    assert {"speedup.png", "strong_time.png", "losses.png", "samples_over_time.png", "projection.png"} <= set(written)
    assert sorted(saved_figures) == written  # every figure was read as it was saved
    assert {name: saved.problems for name, saved in saved_figures.items() if saved.problems} == {}
    # the wide interval is cut at the axis' edge, and said so
    assert any("cut" in text for text in saved_figures["speedup.png"].texts)
    # samples over time on the training images of the whole system, as every figure of training progress
    titles = saved_figures["samples_over_time.png"].titles
    assert any(t.startswith("3,840 images, ") for t in titles) and not any(t.startswith("step ") for t in titles)


@pytest.mark.parametrize(
    "lo, hi, base",
    [(0.0125, 72, 2), (0.0125, 72, 10), (1, 2.47, 2), (9.5, 31, 10), (0.7, 0.73, 10), (1, 1024, 2), (1e-3, 1e9, 10), (3, 5, 10)],
)
def test_a_log_axis_gets_three_to_eight_round_ticks_inside_its_interval(lo, hi, base):
    ticks = log_ticks(lo, hi, base)
    assert 3 <= len(ticks) <= MAX_TICKS and all(lo <= t <= hi for t in ticks)
    assert all(len(tick_text(t)) <= MAX_LABEL for t in ticks) and len({tick_text(t) for t in ticks}) == len(ticks)


def test_losses_of_every_system_share_the_training_images_axis():
    """A label-partitioned run of 10 class GANs makes 12 steps where data-parallel makes 120 for the same budget:
    both end at the budget's training images, not at 12 and 120."""
    dp = record("data_parallel", "bce", "horovod", 0, [300.0, 200.0])
    dp |= {"history": [{"step": s, "d_loss": 0.6, "g_loss": 0.8} for s in (60, 120)], "generator_steps": 120}
    lp = record("label_partitioned", "bce", "mpi", 0, [300.0, 200.0])
    lp |= {
        "history": {str(c): [{"step": s, "d_loss": 0.6, "g_loss": 0.8} for s in (6, 12)] for c in range(10)},
        "generator_steps": {str(c): 12 for c in range(10)},
    }
    for r in (dp, lp):
        r["train_images"] = 3840
    fig = losses_figure([new_record(dp), new_record(lp)])
    ends = {line.get_label().split(" (")[0]: list(line.get_xdata()) for line in fig.axes[0].get_lines()}
    xlabel = fig.axes[0].get_xlabel()
    pyplot().close(fig)
    assert ends == {"data_parallel / bce / horovod": [1920.0, 3840.0], "label_partitioned / bce / mpi": [1920.0, 3840.0]}
    assert xlabel == "training images of the whole system"


def test_bce_and_wgan_losses_never_share_an_axis():
    """A row of axes per loss: the BCE losses and the WGAN critic's, on scales of their own, each on its own axes."""
    bce = record("data_parallel", "bce", "horovod", 0, [300.0, 200.0])
    wgan = record("label_partitioned", "wgan-gp", "mpi", 0, [300.0, 200.0])
    for r, (d, g) in ((bce, (0.6, 0.8)), (wgan, (-40.0, 25.0))):
        r |= {"history": [{"step": s, "d_loss": d, "g_loss": g} for s in (60, 120)], "generator_steps": 120, "train_images": 3840}
    fig = losses_figure([new_record(bce), new_record(wgan)])
    per_axis = [{line.get_label().split(" / ")[1] for line in ax.get_lines()} for ax in fig.axes]
    titles = [ax.get_title() for ax in fig.axes]
    pyplot().close(fig)
    assert len(fig.axes) == 4 and all(len(losses) == 1 for losses in per_axis)
    assert all("one seed per system: no band" in title and "95 %" not in title for title in titles)  # one seed: no band


def test_a_title_promises_no_band_one_seed_cannot_give():
    fig, _ = quality_figure(records_for([0]))
    title = fig._suptitle.get_text()
    pyplot().close(fig)
    assert "95 %" not in title and "no band" in title
    fig, _ = quality_figure(records_for([0, 1]))
    title = fig._suptitle.get_text()
    pyplot().close(fig)
    assert title.endswith("95 % band")


def test_an_efficiency_axis_does_not_magnify_noise(tmp_path, monkeypatch):
    """Weak-scaling efficiencies of 0.9996 and 1.0 keep the ideal and a quarter below it in view: no cliff."""
    import suite.analysis.plots as plots

    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, out, name: drawn.append(fig) or [name])
    table = pd.DataFrame(
        {
            "config": ["a / bce / mpi"] * 2,
            "procs": [1, 2],
            "efficiency": [1.0, 0.9996],
            "efficiency_lo": [None, 0.9995],
            "efficiency_hi": [None, 0.9997],
        }
    )
    plots._ratio_plot(table, "weak", "efficiency", tmp_path)
    low, high = drawn[0].axes[0].get_ylim()
    pyplot().close(drawn[0])
    assert low <= 0.75 and high >= 1.0
