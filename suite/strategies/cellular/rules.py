"""The cellular strategy's traits that the suite reads without torch: the rules of its settings that their types
cannot say (the ``cellular`` section, the scenario's or one entry's with its own fields on top, and a cellular entry's
grids), what its section says about a step's size, and its checkpoints' footprint.

Its registry entry (:mod:`suite.config.registry`) names each function as a trait, which validation, the images budget
and the checkpoints call as they call every strategy's; each broken rule is reported through ``fail`` naming the field.
"""

from __future__ import annotations

from typing import Any

from ...config.plan import CLASSIFIER_FEATURE_DIM, DATASET_CLASSES, ModelBytes, SystemSize, discriminator_batches, process_grid
from ...config.scenario import DatasetConfig, Fail, Run, RunSpec, Scenario
from ...config.shown import shown
from .settings import CellularConfig


def cellular_settings(run: Run) -> CellularConfig:
    """The ``cellular`` section of ``run``, as its dataclass."""
    section: CellularConfig = run.section("cellular")
    return section


def mixture_feature_space(cellular: CellularConfig, dataset: DatasetConfig) -> tuple[int | None, str]:
    """Dimension (None where unknown before loading the data) and name of the mixture FID space: always
    the dataset's steering network (``steering:<dataset>``), never the ruler that scores the comparison."""
    if cellular.mixture_features == "logits":
        return DATASET_CLASSES[dataset.name], f"class-logit space of the steering network steering:{dataset.name}"
    return CLASSIFIER_FEATURE_DIM, f"feature space of the steering network steering:{dataset.name}"


def check_cellular(cellular: CellularConfig, path: str, fail: Fail) -> None:
    """The ``check_settings`` trait: what the section's field bounds cannot say (its ranges are pydantic's)."""
    if cellular.decision_margin > 0 and cellular.bootstrap_draws < 2:
        fail(
            f"{path}.bootstrap_draws",
            f"{cellular.bootstrap_draws} draws cannot estimate a mixture score's noise for decision_margin "
            f"{shown(cellular.decision_margin)}; use at least 2 (100 by default), or decision_margin 0",
        )
    if cellular.n_replacements > cellular.population:
        fail(f"{path}.n_replacements", f"{cellular.n_replacements} is more than the population ({cellular.population})")


def check_mixture_space(cellular: CellularConfig, path: str, scenario: Scenario, fail: Fail) -> None:
    """The ``scenario_rules`` trait: the mixture FID's space is the steering network's, with more samples than
    dimensions (it reads ``metrics`` and ``dataset``)."""
    if cellular.mixture_features == "metrics":
        fail(
            f"{path}.mixture_features",
            f"metrics would steer the mixture weights with the run's ruler (metrics.features: {scenario.metrics.features}), "
            f"the network that judges the comparison; no system trains on its judge: use logits or features "
            f"(the steering network steering:{scenario.dataset.name})",
        )
    dim, space = mixture_feature_space(cellular, scenario.dataset)
    if dim is not None and cellular.mixture_samples <= dim:
        fail(
            f"{path}.mixture_samples",
            f"{cellular.mixture_samples} samples give a rank-deficient covariance in the "
            f"{dim}-d {space}: an FID needs more samples than dimensions (Lipizzaner: 1000 in 10-d)",
        )


def check_cellular_spec(spec: RunSpec, path: str, scaling: str, fail: Fail) -> None:
    """The ``check_entry`` trait: a cellular entry's grids: one grid shared evenly (strong), or the same block of cells per rank (weak)."""
    if scaling == "strong":
        grid = spec.grid
        if grid is None or len(grid) != 2 or min(grid) < 1:
            fail(f"{path}.grid", "cellular strong scaling needs grid: [rows, cols]")
        for p in spec.procs:
            try:
                process_grid(grid, p)
            except ValueError as error:
                fail(f"{path}.procs", str(error))
    else:
        if spec.grids is None or len(spec.grids) != len(spec.procs):
            fail(f"{path}.grids", "cellular weak scaling needs one grid [rows, cols] per procs entry")
        blocks = set()
        for p, g in zip(spec.procs, spec.grids):
            try:
                if len(g) != 2 or min(g) < 1:
                    raise ValueError(f"{shown(g)} is not [rows, cols]")
                process_grid(g, p)
            except ValueError:
                fail(
                    f"{path}.grids",
                    f"grid {shown(g)} cannot be shared evenly by {p} processes; give each rank the same number of cells",
                )
            blocks.add(g[0] * g[1] // p)
        if len(blocks) > 1:
            fail(
                f"{path}.grids",
                f"weak scaling keeps the cells per rank fixed, but these grids give {sorted(blocks)} cells per rank; "
                "e.g. grids: [[3, 3], [3, 6], [6, 6]] for procs: [1, 2, 4] (a 3x3 block per rank)",
            )


def cellular_step_images(size: SystemSize) -> int | None:
    """One iteration: the batches of every cell of the grid that its discriminators train on."""
    if size.cells is None or size.batches_per_iteration is None:
        return None
    return size.cells * discriminator_batches(size.batches_per_iteration, size.discriminator_skip) * size.batch_size


def step_settings(cellular: CellularConfig) -> dict[str, Any]:
    """The ``step_settings`` trait: a cell's batches per iteration (None for a full pass, which the data tells) and the
    discriminator's skip (:func:`cellular_step_images`)."""
    return {
        "batches_per_iteration": cellular.batches_per_iteration or None,
        "discriminator_skip": cellular.discriminator_skip,
    }


def cellular_footprint(run: Run, sizes: ModelBytes) -> tuple[int, int]:
    """The ``footprint`` trait: a checkpoint holds every cell's population and snapshots; the finished files are the
    mixture of a neighbourhood's generators and the best cell (with the record, log and sample grid, 1 MB)."""
    rows, cols = run.grid or (1, 1)  # a cellular run has its grid (expansion gives it one)
    cellular = cellular_settings(run)
    hood = 9 if cellular.neighbourhood == "moore" else 5
    return rows * cols * (cellular.population * sizes.gan + sizes.snapshots * sizes.generator), (
        hood + 1
    ) * sizes.generator + 2**20
