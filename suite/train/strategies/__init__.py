"""Training strategies: each turns (run, engine, data) into a trained model and record fields.

Every strategy is a :class:`Strategy` with four phases, called by the worker on every rank:
``setup`` (groups, networks, engine wrappers, feature networks), ``warm_up`` (the first
``train.warmup_steps`` steps of every GAN, before the training window), ``train`` (the rest,
inside the window) and ``finalize`` (gathers, hand-offs and packaging, after the window).
Each strategy registers its name and what it accepts in :mod:`suite.config.registry`, and keeps what the suite reads
without torch (its scenario section, its rules, its record part) in torch-free modules of its own package, as a plugin
does; :func:`suite.train.strategies.base.create` builds the strategy of a run. This package imports nothing, so that
reading those modules loads no torch.
"""
