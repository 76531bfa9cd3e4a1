"""Sub-commands about scenario files themselves: ``suite schema`` and ``suite scenarios``."""

from __future__ import annotations

import argparse
import json


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the scenario file's JSON Schema (:func:`suite.config.scenario.scenario_json_schema`)."""
    from ..config.scenario import scenario_json_schema

    print(json.dumps(scenario_json_schema(), indent=2))
    return 0


def cmd_scenarios(args: argparse.Namespace) -> int:
    """List the built-in scenarios (:mod:`suite.config.builtin`), one line each: the name, then the description."""
    from ..config.builtin import builtin_scenarios
    from ..config.escape import one_line

    found = builtin_scenarios()
    width = max((len(one.name) for one in found), default=0)
    for one in found:  # a description is a scenario file's words: one line of data (no OSC-8 link, no clear-screen)
        print(f"{one_line(one.name):<{width}}  {one_line(one.description)}")
    print(f"\n`suite run NAME` runs one (results/NAME); the files are in {found[0].path.parent if found else '(none found)'}")
    if any(one.name == "quickstart" for one in found):
        print("new here: `suite run quickstart`, then `suite report results/quickstart` (docs/quickstart.md)")
    return 0
