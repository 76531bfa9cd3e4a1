"""Local SGD for gan-scaling-suite: data-parallel training that averages the models every k steps.

An example of a strategy plugin (docs/adding-a-strategy.md): :mod:`.entry` registers it, with its settings
section, and stays free of torch; :mod:`.strategy` trains it.
"""
