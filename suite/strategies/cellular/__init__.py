"""``cellular``: Lipizzaner / Mustangs coevolution on a toroidal grid, over MPI (papers 001, 003).

Each cell of an R x C torus holds ``population`` generators and discriminators. Each is an
*individual*: network weights, its own Adam state and its own learning rate, which travel
together. One iteration (``cellular.iterations``, default ``train.epochs``) does for every cell,
synchronously, what one iteration of Lipizzaner's ``LipizzanerGANTrainer.train`` does:

1. **exchange**: receive the neighbourhood's individuals as they were at the end of the last
   iteration (the cell plus 4 von Neumann or 8 Moore neighbours);
2. **fitness**: every generator against every discriminator of the neighbourhood on
   ``fitness_samples`` real images (and as many generated), in batches; a generator's fitness
   is its mean generator loss, a discriminator's its mean discriminator loss (lower is better);
3. **selection**: tournaments (``tournament_size``) pick the cell's generators and
   discriminators from the neighbourhood, each with its Adam state and learning rate;
4. **training**: ``batches_per_iteration`` batches of a fresh shuffle of the data (0: a full
   pass). On each batch the generators take one step against a discriminator drawn from the
   cell's, then (on every ``discriminator_skip + 1``-th batch) the discriminators against a
   drawn generator. Before every step the learning rates mutate (``mutation_rate``,
   ``mutation_probability``). The loss is the run's (``mustangs``: minimax, mse or heuristic,
   drawn per batch or per cell);
5. **replacement**: trained individuals replace the cell's worst previous ones where fitter on
   the same fitness sample (``n_replacements``); a cell keeps its individuals best first;
6. **mixture**: the cell's weights over its neighbourhood's best generators take one (1+1)-ES
   step, kept only when the mixture's FID improves (``mixture_samples`` samples, by default in
   the class-logit space of the steering network ``steering:<dataset>``, as Lipizzaner scores
   MNIST in its CNN's 10 outputs; never the ruler that scores the comparison).

Distribution: ranks form a periodic Cartesian communicator; each owns an equal rectangular
block of cells. Once per iteration every rank sends the states of its boundary cells to the
neighbouring ranks that need them, as flat float32 arrays with non-blocking point-to-point
messages (no servers, no pickles). Every random draw is seeded by the scenario seed, the
cell's coordinates and the iteration, and a cell reads even its own individuals back from its
flat vector, so a grid gives the same generators on any number of ranks (with one thread per
rank, so that floating-point reductions agree). docs/deviations.md lists where this differs from the
papers and from Lipizzaner's code.

The package: :mod:`.grid` (the torus and Lipizzaner's operators, pure functions), :mod:`.state` (individuals,
cells and the exchange), :mod:`.algorithm` (one iteration) and :mod:`.strategy` (the :class:`Strategy`); what the
suite reads without torch, as it reads a plugin's: :mod:`.entry` (its registry entry), :mod:`.settings` (its scenario
section), :mod:`.rules` (that section's rules, its grids', its step's size and its checkpoints' footprint) and
:mod:`.record` (its record part). The registry loads its entry by name (:data:`suite.config.registry.BUILT_IN_STRATEGIES`),
which names the rest; outside it only analysis's accessor of record parts imports this package.
"""
