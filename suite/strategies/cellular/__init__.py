"""``cellular``: Lipizzaner / Mustangs coevolution on a toroidal grid, over MPI (papers 001, 003).

docs/strategies.md describes one iteration (exchange, fitness, selection, training, replacement,
mixture) and docs/deviations.md where it differs from the papers and Lipizzaner's code. Every
random draw is seeded by the scenario seed, the cell's coordinates and the iteration, and a cell
reads even its own individuals back from its flat vector, so a grid gives the same generators on
any number of ranks.

The package: :mod:`.grid` (the torus and Lipizzaner's operators, pure functions), :mod:`.state` (individuals,
cells and the exchange), :mod:`.algorithm` (one iteration) and :mod:`.strategy` (the :class:`Strategy`); what the
suite reads without torch, as it reads a plugin's: :mod:`.entry` (its registry entry), :mod:`.settings` (its scenario
section), :mod:`.rules` (that section's rules, its grids', its step's size and its checkpoints' footprint) and
:mod:`.record` (its record part). The registry loads its entry by name (:data:`suite.config.registry.BUILT_IN_STRATEGIES`),
which names the rest; outside it only analysis's accessor of record parts imports this package.
"""
