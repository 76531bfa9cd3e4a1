"""The ``cellular`` scenario section (torch-free: the suite reads it to validate scenarios), named by the strategy's
registry entry as its ``settings_class``; a scenario file writes it at its top level and a run entry its own fields
under the same name, as every strategy's and plugin's section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from ...config.schema import AtMost

_NEVER = "a run this long would never finish"
_CELL = "every cell holds this many networks in memory"
_IMAGES = "the images are held in memory while they are scored"
_MARGIN = "a margin of more standard errors would almost never let a better candidate win"


@dataclass(frozen=True)
class CellularConfig:
    """Lipizzaner / Mustangs coevolution; defaults are Lipizzaner's MNIST settings (paper 003, Table 1)."""

    iterations: Annotated[int, Field(ge=1), AtMost(10**7, _NEVER)] | None = None
    """Coevolution iterations (default: train.epochs; 200 in the paper; one telemetry step each)."""
    population: Annotated[int, Field(ge=1), AtMost(1000, _CELL)] = 1
    """Generators and discriminators per cell."""
    neighbourhood: Literal["von_neumann", "moore"] = "von_neumann"
    """Cell plus its 4 (von Neumann) or 8 (Moore) torus neighbours."""
    tournament_size: Annotated[int, Field(ge=1), AtMost(1000, _CELL)] = 2
    """Individuals drawn per tournament."""
    n_replacements: Annotated[int, Field(ge=1), AtMost(1000, _CELL)] = 1
    """Trained individuals that may replace the cell's worst ones each iteration (at most population)."""
    mutation_probability: Annotated[float, Field(ge=0, le=1)] = 0.5
    """Probability that a learning rate is mutated before each training step."""
    mutation_rate: Annotated[float, Field(ge=0), AtMost(1, "a learning rate moves by mutation_rate x N(-lr / 10, lr)")] = 0.0001
    """Lipizzaner's alpha: a mutated learning rate moves by mutation_rate * N(-train.lr / 10, train.lr)."""
    fitness_samples: Annotated[int, Field(ge=1), AtMost(10**6, _IMAGES)] = 1000
    """Real images (and as many generated) per fitness evaluation, run in batches of train.batch_size."""
    batches_per_iteration: Annotated[int, Field(ge=0), AtMost(10**6, _NEVER)] = 0
    """Training batches per cell per iteration, without replacement (0 or more than a pass: one full pass)."""
    discriminator_skip: Annotated[int, Field(ge=0), AtMost(10**6, _NEVER)] = 1
    """Discriminators train on every (discriminator_skip + 1)-th batch only (0: on every batch)."""
    mixture_scale: Annotated[float, Field(ge=0), AtMost(1, "mixture weights lie in [0, 1]")] = 0.01
    """Standard deviation of the (1+1)-ES step on mixture weights."""
    mixture_samples: Annotated[int, Field(ge=1), AtMost(10**6, _IMAGES)] = 1000
    """Generated (and real) images that score a mixture; more than the feature dimension."""
    mixture_features: Literal["logits", "features", "metrics"] = "logits"
    """Mixture FID space, always of the steering network steering:<dataset>, never the ruler: its class logits
    (10-d on digits, mnist, cifar10) or its 128-d features; metrics (the run's ruler) is refused."""
    mixture_sampling: Literal["exact_proportion", "independent_probability"] = "exact_proportion"
    """How a mixture's samples pick their generator: exact shares of the weights, or each independently."""
    mustangs_choice: Literal["batch", "cell"] = "batch"
    """Mustangs draws its loss per batch or once per cell."""
    decision_margin: Annotated[float, Field(ge=0), AtMost(10, _MARGIN)] = 2.0
    """Standard errors by which a score must be lower to win a decision (tournament, replacement, mixture-weight step,
    best mixture), estimated from the samples that made both scores; within it the incumbent stays (the first drawn,
    the previous individual, the current weights, the first cell). 0: the papers' strictly-lower rule
    (docs/deviations.md, reports/cellular-decisions)."""
    bootstrap_draws: Annotated[int, Field(ge=0), AtMost(10**4, _NEVER)] = 100
    """Bootstrap resamples that estimate a mixture FID difference's standard error (0: none, only with margin 0)."""
