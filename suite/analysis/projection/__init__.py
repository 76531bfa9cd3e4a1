"""``suite project RESULTS``: a cost model per strategy, fitted on measured runs, checked against
the runs it did not see, and projected to process counts no machine here reaches.

Everything is read from the run records. Per rank r of a run, ``busy_r`` is its window time to
its last step and ``comm_r`` the time it was blocked on communication; the model fits the
rest, ``busy_r - comm_r``, and adds communication from the network model
(:mod:`suite.measure.network`: alpha-beta links, allreduce algorithms, presets). T is the training
window's timed steps (``train_s`` less its warm-up ``warmup_s``, the slowest rank); S steps; x images through a discriminator per step and
rank; m bytes one rank hands to collectives per step (counted by the engines); AR(m, p) an
allreduce over p ranks.

* ``data_parallel``, ``conditional`` (the ``one_group`` cost model): T(P) = S (c0 + c1 x + AR(m, P) / k);
  strong scaling splits the global batch, x = x(1) / P; weak scaling keeps x; k is the strategy's
  ``steps_per_allreduce`` trait read from its record part (1; the example plugin's local SGD averages its model
  every k steps, its record's ``allreduce_every``). A strategy whose entry names
  no cost model, or that is not installed, is listed as not projected, by name.
* ``label_partitioned`` over C classes with s_c window steps each: P <= C, no communication,
  T(P) = max over ranks of sum over its classes of s_c (c0 + c1 x); P > C (a multiple of C),
  groups of g = P/C ranks, T(P) = max_c s_c (c0 + c1 x/g + AR(m, g)). Weak scaling, one class
  per rank: T(P) = max over the first P classes of s_c (c0 + c1 x): the load imbalance of
  unequal classes. Beyond the measured classes, class sizes repeat.
* ``cellular`` with k cells per rank, neighbourhood h, population p, I iterations:
  T(P) = I (k (tau + phi p (2h + 1) + mu n(h)) + X(P)), where tau is the per-cell work that does
  not depend on h (training, packing genomes), phi the cost of one generator pass over the
  fitness sample (a cell makes p (2h + 1) of them: every neighbourhood generator against every
  discriminator, then the trained individuals; discriminator passes are about 1 % of a
  generator's at these sizes and left out), mu one mixture score (n(h) = 1 on a 1-cell
  neighbourhood, else 2: before and after the ES proposal), and X(P) the neighbour exchange:
  the most loaded rank's sum over its neighbour ranks of alpha + cells sent x genome bytes x beta.

c0 and c1 come from a least-squares fit (both >= 0) of (busy_r - comm_r) / S_r against x_r;
with one batch size among the fit points c0 cannot be told from c1 and is set to 0 (time
proportional to the images), which the model's note says. Bytes are counted, not timed, and do
not depend on P, so they come from every multi-rank record of the same networks, held-out ones
included; a label-partitioned group exchanges the gradients of data_parallel's pair.

Runs whose ranks x threads exceed the node's cores (oversubscribed) measure contention: they are
never fitted nor validated, only listed. Projections assume one rank per core set (or GPU) with
the measured threads, computing as fast as the measured ranks, unless ``compute_scale`` says
otherwise.

The package: :mod:`.model` (the cost models and their predictions), :mod:`.fit` (what the records
say, the fit, its validation and projections) and :mod:`.render` (the papers' points, the chart, the
markdown and CSVs).
"""

from ..projection_defaults import DEFAULT_RANKS
from .fit import fit, fit_all, project
from .model import CellularModel, ClassGroupsModel, GanModel, Problem, exchange_plan, predict
from .render import (
    REPORT_RANKS,
    compare_papers,
    paper_points,
    projection_lines,
    projection_tables,
    run_projection,
    write_projection,
)
from .validation import validate

__all__ = [
    "DEFAULT_RANKS",
    "REPORT_RANKS",
    "CellularModel",
    "ClassGroupsModel",
    "GanModel",
    "Problem",
    "compare_papers",
    "exchange_plan",
    "fit",
    "fit_all",
    "paper_points",
    "predict",
    "project",
    "projection_lines",
    "projection_tables",
    "run_projection",
    "validate",
    "write_projection",
]
