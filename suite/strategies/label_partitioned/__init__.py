"""``label_partitioned``: one GAN per class, trained concurrently (papers 000 and 002), one package as a plugin's:
:mod:`.entry` (its registry entry) and :mod:`.record` (its record part), which the suite reads without torch, and
:mod:`.strategy` (the :class:`~suite.train.strategies.base.Strategy`, torch)."""
