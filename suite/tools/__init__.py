"""Tools that run things to analyse them: the regression gate (``suite gate``) checks out a baseline revision,
sets up its environment and runs the workload on both sides with ``suite run``, then judges the pairs with the
analysis' statistics. Above both analysis and running, below the command."""
