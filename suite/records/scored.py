"""The parts of a record that say what the run's models scored (:class:`Quality`, per class), their scores along
training (the curve and the time to target) and the losses along training (``history``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .fields import Count, Seconds, column


@dataclass
class Quality:
    """``quality`` (and ``quality_<model>``): one model's scores (see :mod:`suite.measure.metrics.evaluate`)."""

    features: str | None = column()
    """The ruler: the feature network (``inception``, ``classifier:<dataset>``, ...)."""
    ruler_sha256: str | None = column()
    """The pinned sha256 of the ruler's weights file (:mod:`suite.measure.metrics.rulers`)."""
    protocol: str | None = column()
    """``metrics.protocol``: ``suite`` or ``standard`` (the papers'); null in records written before protocols (``suite``)."""
    papers_comparable: bool | None = column()
    """The papers' network and protocol both: its IS and FID are comparable with the numbers papers print."""
    comparability: str | None = None
    """One line: comparable with the papers' numbers, or why not."""
    features_detail: str | None = None
    device: str | None = None
    """Where the feature network ran (``cpu``, ``cuda:0``)."""
    feature_dim: int | None = None
    n: int | None = column("quality_n")
    n_real: int | None = None
    classes: list[int] | None = None
    num_classes: int | None = None
    pixel_std: float | None = None
    is_mean: float | None = column()
    is_std: float | None = column()
    is_splits: int | None = None
    is_split_n: int | None = None
    is_note: str | None = None
    fid: float | None = column()
    fid_note: str | None = None
    kid_mean: float | None = column()
    kid_std: float | None = column()
    kid_subset_size: int | None = None
    kid_subsets: int | None = None
    precision: float | None = column()
    """Fidelity: the share of samples inside the real k-NN manifold (Kynkäänniemi et al. 2019; :mod:`suite.measure.metrics.manifold`)."""
    recall: float | None = column()
    """Diversity: the share of real samples inside the samples' k-NN manifold."""
    density: float | None = column()
    """Fidelity: real k-NN balls holding a sample, per sample and per k (Naeem et al. 2020); about 1 where samples are as the data."""
    coverage: float | None = column()
    """Diversity: the share of real samples whose k-NN ball holds a sample; near 0 for a collapse (:mod:`suite.analysis.collapse`)."""
    prdc_k: int | None = None
    """The k of the four scores above (``metrics.prdc_k``); null in records written before them."""
    prdc_n_real: int | None = None
    """Real samples of the four scores (``n`` generated beside them)."""
    tvd: float | None = column()
    label_acc: float | None = column()
    classifier_accuracy: float | None = None
    per_class_label: dict[str, PerClassScore] | None = None
    per_class_predicted: dict[str, PerClassScore] | None = None
    untrained_fid: float | None = None
    untrained_kid: float | None = None
    ema_fid: float | None = column()
    """FID of the run's EMA generator (``train.ema_half_life``) at the end of its budget, on ``ema_n`` samples of the
    common latents: the end-of-budget estimand (:func:`suite.analysis.estimand.end_fid`)."""
    ema_kid_mean: float | None = column()
    """KID of the EMA generator on the same samples: the unbiased MMD^2 of all of them against the real draw, the
    quantity KID's subset mean estimates (:func:`suite.measure.metrics.scores.mmd2_unbiased_all`)."""
    ema_n: int | None = column()
    """Generated samples that scored the EMA generator (``metrics.ema_samples``)."""
    latent_seed: int | None = None
    """The seed of the latent vectors and labels the model was scored on: the same for every system, seed and curve
    point (common random numbers); null in records written before (each run scored on its own seed's draws)."""
    not_scorable: str | None = None
    """Why the samples could not be scored (non-finite, constant, a singular problem); the scores are then null."""


@dataclass
class PerClassScore:
    """One class of ``quality.per_class_label`` or ``per_class_predicted``: its samples and FID or KID."""

    OPEN: ClassVar[bool] = True
    n: Count
    metric: Literal["fid", "kid"] | None
    n_real: Count | None
    fid: float | None
    kid_mean: float | None
    kid_std: float | None
    kid_subset_size: Count | None
    kid_subsets: Count | None
    note: str | None


@dataclass
class CurvePoint:
    """A point of ``curve`` or ``mixture_curve``: a model scored during training, at a clock reading and a step (or a
    cellular iteration)."""

    OPEN: ClassVar[bool] = True
    clock_s: Seconds
    step: Count | None = None
    iteration: Count | None = None
    images: Count | None = None
    fid: float | None = None
    kid_mean: float | None = None
    kid_std: float | None = None
    is_mean: float | None = None
    features: str | None = None
    n: Count | None = None


@dataclass
class TimeToTarget:
    """``time_to_target``: when the run's score first reached the target (``metrics.target``), on which ruler."""

    OPEN: ClassVar[bool] = True
    reached: bool
    metric: str | None = None
    target: float | None = None
    features: str | None = None
    n: Count | None = None
    clock_s: Seconds | None = None
    """When the score reached the target: interpolated between the curve points ``clock_lo`` and ``clock_hi`` that
    bracket it, linear in the log score (:func:`suite.measure.metrics.curve.crossing`); in records written before
    the bracket was recorded, the clock of the first point that met it."""
    clock_lo: Seconds | None = None
    """The clock of the last curve point before ``clock_hi`` (0, the window's start, where the first point met the
    target); absent in older records."""
    clock_hi: Seconds | None = None
    """The clock of the first curve point that met the target; absent in older records."""
    step: Count | None = None
    best: float | None = None
    points: Count | None = None


@dataclass
class LossPoint:
    """A point of ``history``: the losses at a generator step (null where they were not finite)."""

    OPEN: ClassVar[bool] = True
    step: Count
    epoch: Count | None = None
    clock_s: Seconds | None = None
    d_loss: float | None = None
    g_loss: float | None = None


@dataclass
class CellPoint:
    """A point of a cellular cell's ``history``: its learning rates and mixture FID at an iteration."""

    OPEN: ClassVar[bool] = True
    iteration: Count
    clock_s: Seconds | None = None
    lr_d: float | list[float] | None = None
    lr_g: float | list[float] | None = None
    mixture_fid: float | None = None
    accepted: bool | None = None
    decisions: list[dict] | None = None
    """The iteration's decisions (tournament, replace, mixture): what was chosen and the z value of the closest
    call, the improvement in standard errors (:mod:`suite.strategies.cellular.decide`)."""


History = list[LossPoint] | dict[str, list[LossPoint]] | dict[str, list[CellPoint]]
"""``history``: the losses along training, a list, or per class GAN (label_partitioned) or per cell (cellular)."""
