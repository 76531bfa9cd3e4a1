"""``label_partitioned``: one GAN per class, trained concurrently (papers 000 and 002): :mod:`.strategy` (the
:class:`~suite.train.strategies.base.Strategy`, torch) and what the suite reads without torch, as it reads a plugin's:
:mod:`.record` (its record part). Its registry entry (:mod:`suite.config.registry`) names them."""
