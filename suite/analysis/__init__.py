"""Analysis of run records: the report, the findings and verdicts, the cost projection, comparisons and the
regression gate."""
