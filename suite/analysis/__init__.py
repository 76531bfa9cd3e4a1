"""Analysis of run records: the report, the findings and verdicts, the cost projection and comparisons; pure
statistics and rendering (the regression gate, which runs things, is in :mod:`suite.tools`)."""
