"""Configuration, the bottom layer: the names (registry), plain data checked against dataclasses (schema),
scenarios (validation, expansion into runs) and the arithmetic of splitting a run over its ranks (plan).

Plain data only: nothing here imports torch or anything that trains.
"""
