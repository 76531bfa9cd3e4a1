"""The statistics of the analysis: pure functions on numbers, records and tables that neither write files nor
print. :mod:`.verdicts` (estimates, intervals and the tests of every pair), :mod:`.paired` (the gate's paired
verdicts), :mod:`.speedup` (speedup and efficiency), :mod:`.power` (what a run could have detected) and
:mod:`.settling` (at what scale a verdict holds)."""
