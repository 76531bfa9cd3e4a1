"""What every training strategy is: :mod:`.base`'s :class:`~suite.train.strategies.base.Strategy`, which turns
(run, engine, data) into a trained model and record fields, its :class:`~suite.train.strategies.base.Outcome`, and
:func:`~suite.train.strategies.base.create`, which builds the strategy of a run from its registry entry.

Every strategy is a :class:`Strategy` with four phases, called by the worker on every rank:
``setup`` (groups, networks, engine wrappers, feature networks), ``warm_up`` (the first
``train.warmup_steps`` steps of every GAN, before the training window), ``train`` (the rest,
inside the window) and ``finalize`` (gathers, hand-offs and packaging, after the window).
The strategies themselves are packages of their own, the built-in ones under :mod:`suite.strategies`, a plugin's in
its distribution: each with its registry entry and what the suite reads without torch (its record part, its scenario
section and rules). This package imports nothing.
"""
