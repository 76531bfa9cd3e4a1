"""The built-in strategies, one package each, as a plugin's: its registry entry (``entry.py``: its name and traits,
``ENTRIES``), what the suite reads without torch (its record part, its scenario section and that section's rules) and
its implementation (``strategy.py``, a :class:`suite.train.strategies.base.Strategy`, torch).

:mod:`suite.config.registry` loads each package's ``entry`` module by name (:data:`suite.config.registry.BUILT_IN`),
as it loads an installed plugin's entry point, when a registry is first read; an entry module and the modules it
imports import neither torch nor :mod:`suite.train`, so that validating a scenario or reading a record loads no
training module (``tests/test_house.py``). This package imports nothing.
"""
