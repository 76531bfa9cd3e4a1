"""The report's figures: one look per system across figures, bands over seeds, sample grids, and no crash on missing data."""

from __future__ import annotations

import dataclasses

import matplotlib.colors as mcolors
import pytest
import torch
from matplotlib.collections import PolyCollection
from PIL import Image

from conftest import run_scenario, tiny_scenario
from suite.analysis.palette import OKABE_ITO, style, style_of
from suite.analysis.plots import losses_figure, plot_losses, plot_quality_curves, plot_scaling, pyplot, quality_figure
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
            {"clock_s": 5.0 * i, "step": 10 * i, "fid": fid, "features": "classifier:digits", "n": 500}
            for i, fid in enumerate(fids)
        ],
        "history": [{"step": 10 * i, "d_loss": 0.6 + 0.01 * seed, "g_loss": 0.8 - 0.01 * i} for i in range(len(fids))],
    }


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
    # the colour is the strategy's Okabe-Ito colour, by registry position; the loss sets marker and line
    assert first["data_parallel / bce"] == OKABE_ITO[0].lower()
    assert style("label_partitioned", "bce", "mpi").color == style("label_partitioned", "wgan-gp", "mpi").color
    assert style("label_partitioned", "bce", "mpi").marker != style("label_partitioned", "wgan-gp", "mpi").marker
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
    caplog.set_level("INFO", logger="suite.analysis.plots")
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
