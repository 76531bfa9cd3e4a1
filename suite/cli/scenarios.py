"""Sub-commands about scenario files themselves: ``suite schema``."""

from __future__ import annotations

import argparse
import json


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the scenario file's JSON Schema (:func:`suite.config.scenario.scenario_json_schema`)."""
    from ..config.scenario import scenario_json_schema

    print(json.dumps(scenario_json_schema(), indent=2))
    return 0
