"""Image-quality metrics: feature networks, IS/FID/KID/TVD, and the evaluation of a run's samples.

Import each name from its module (``evaluate``, ``features``, ``reference``, ``scores``, ...): the package itself loads
nothing, so a light module (``signals``, ``curve``) does not bring torch with it and `suite run` refuses a bad scenario,
or `suite report` reads records, without it.
"""
