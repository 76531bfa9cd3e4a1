"""What every training strategy is: :mod:`.base`'s :class:`~suite.train.strategies.base.Strategy` (four phases the
worker calls on every rank: ``setup``, ``warm_up``, ``train`` inside the window, ``finalize``), its
:class:`~suite.train.strategies.base.Outcome`, and :func:`~suite.train.strategies.base.create`, which builds the
strategy of a run from its registry entry. The strategies themselves are packages of their own
(docs/adding-a-strategy.md). This package imports nothing.
"""
