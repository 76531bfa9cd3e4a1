"""``suite project RESULTS``: a cost model per strategy, fitted on measured runs, checked against
the runs it did not see, and projected to process counts no machine here reaches.

The model, its equations per cost model and the network presets are in docs/reports.md (Projection). Per rank
the model fits the computation, ``busy_r - comm_r`` (window time to its last step less the time blocked on
communication), by non-negative least squares of (busy_r - comm_r) / S_r against the images x_r; with one batch
size among the fit points c0 cannot be told from c1 and is set to 0, which the model's note says. Communication
comes from the network model (:mod:`suite.measure.network`). Bytes are counted, not timed, and do not depend on P,
so they come from every multi-rank record of the same networks, held-out ones included. Cellular's phi leaves the
discriminator passes out (about 1 % of a generator's at these sizes). Oversubscribed runs (ranks x threads over the
node's cores) measure contention: they are never fitted nor validated, only listed.

The package: :mod:`.model` (the cost models and their predictions), :mod:`.fit` (what the records
say, the fit, its validation and projections) and :mod:`.render` (the papers' points, the chart, the
markdown and CSVs).
"""
