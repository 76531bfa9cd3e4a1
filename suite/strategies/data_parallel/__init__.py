"""``data_parallel`` and ``conditional``: one model on every rank, unconditional or label-conditioned:
:mod:`.entry` (their registry entries, torch-free) and :mod:`.strategy` (the
:class:`~suite.train.strategies.base.Strategy`, torch)."""
