"""The defaults of ``suite project`` that its ``--help`` shows: light (no numpy, pandas or matplotlib), so that the
parser reads them without loading :mod:`suite.analysis.projection`'s modules.
"""

DEFAULT_RANKS = [2**i for i in range(13)]
"""``suite project --ranks`` by default: 1, 2, 4, ..., 4096."""
DEFAULT_NETWORK = "perlmutter"
"""The network ``suite project`` and the report project on by default: a current machine (NERSC Perlmutter, 4 A100 per
node); ``summit`` (retired) and the others are there by name (``--network``)."""
