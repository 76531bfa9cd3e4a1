"""Strings from records, scenarios and files are data where they land (issue 52, item 4).

The hostile set: HTML that would run (``<iframe src=javascript:...>``), ESC and OSC sequences (a terminal
hyperlink, a screen clear), BEL, the right-to-left override U+202E, NUL, a line break, a ``|`` and a run of
backticks. Every free-text string field of real records (errors, devices, hosts, the machine's CPU and GPU, notes,
versions) is set to it; ``suite report`` writes markdown and CSV in which none of it is live, and ``suite compare``
prints nothing raw. Unit tests pin each escaping function (:mod:`suite.config.escape`).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from conftest import REPO
from suite.cli import main
from suite.config.escape import code_fence, csv_cell, fence_for, markdown_cell, one_line, terminal
from suite.records.codec import check_record
from suite.records.record import SCHEMA_VERSION

DIGITS = REPO / "reports" / "digits" / "records.json"

HOSTILE = "<iframe src=javascript:alert(1)>\x1b]8;;http://evil\x07link\x1b]8;;\x07\x1b[2J\u202eexe.txt\x00```\n| x |"
"""Every trick of the issue in one string."""

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")
"""What must never reach a terminal or a page: controls (line breaks and tabs aside), bidirectional characters."""
RAW = re.compile(CONTROL.pattern + "|<iframe", re.IGNORECASE)
"""What must never appear in markdown: :data:`CONTROL` and a live tag."""

ENUMERATED = (
    # fields whose values the report looks up (a name of the registry, a dataset, a feature network): a string
    # outside their set is another problem than escaping, and they are left as recorded
    "settings.",
    "neighbourhood",
    "dataset.",
    "curve.",
    "mixture_curve.",
    "mixture_score.",
    "quality.features",
    "quality_best_cell.features",
    "quality.protocol",
    "quality_best_cell.protocol",
    "ranking.",
    "time_to_target.",
    "architecture",
    "critic_norm",
    "class_schedule",
    "model_files",
    "groups.",
    "replica_digests",
)

ADDED = ("error", "reason", "machine.gpu", "machine.gpu_driver", "machine.cuda", "git_note")
"""Free-text fields the CPU records leave out, added with the hostile string."""

RUNS = [
    "conditional-bce-horovod-p1-s0-r0",
    "conditional-bce-horovod-p1-s1-r0",
    "conditional-bce-horovod-p2-s0-r0",
    "conditional-bce-horovod-p2-s1-r0",
]


def _string_paths(value, prefix=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _string_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_paths(item, (*prefix, index))
    elif isinstance(value, str):
        yield prefix


def _set(data, path, value):
    for key in path[:-1]:
        data = data.setdefault(key, {}) if isinstance(data, dict) else data[key]
    data[path[-1]] = value


def hostile_records() -> tuple[list[dict], set[str]]:
    """The digits job's records of :data:`RUNS` with every free-text string field the record reader accepts it in
    set to :data:`HOSTILE` (and the first run failed with it as its error); the fields set, by dotted path."""
    by_id = {r["run_id"]: r for r in json.loads(DIGITS.read_text())}
    taken: set[str] = set()
    out = []
    for run_id in RUNS:
        record = {**copy.deepcopy(by_id[run_id]), "schema": SCHEMA_VERSION}
        paths = [p for p in _string_paths(record) if not ".".join(map(str, p)).startswith(ENUMERATED)]
        for path in [*paths, *(tuple(name.split(".")) for name in ADDED)]:
            trial = copy.deepcopy(record)
            _set(trial, path, HOSTILE)
            try:
                check_record(trial, "r.json")
            except ValueError:
                continue  # a field the reader checks (a safe name, a digest): refused there, never shown
            record = trial
            taken.add(".".join(map(str, path)))
        out.append(record)
    out[0]["status"] = "failed"
    return out, taken


@pytest.fixture(scope="module")
def hostile_results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "results"
    records, _ = hostile_records()
    for record in records:
        (root / record["run_id"]).mkdir(parents=True)
        (root / record["run_id"] / "result.json").write_text(json.dumps(record))
    (root / "scenario.yaml").write_text(f"name: hostile\n# ````\n```\n</code><script>x</script>\n# {HOSTILE!r}\nruns: []\n")
    return root


def test_the_hostile_string_reaches_the_fields_of_the_issue():
    _, taken = hostile_records()
    assert {"device", "machine.gpu", "machine.cpu_model", "error", "machine.host", "launcher"} <= taken
    assert len(taken) >= 30  # every free-text field of the record, not a chosen few


def test_terminal_escapes_controls_bidi_and_nul_and_keeps_plain_text():
    assert terminal("plain text, ünïcode: 1 < 2 | ok\n\tnext") == "plain text, ünïcode: 1 < 2 | ok\n\tnext"
    assert terminal("\x1b]8;;http://x\x07\u202e\x00\x9b\x7f\r") == "\\x1b]8;;http://x\\x07\\u202e\\x00\\x9b\\x7f\\x0d"
    assert terminal("a\nb\tc", keep_lines=False) == "a\\x0ab\\x09c"
    assert one_line("a\r\nb\nc\x1b") == "a b c\\x1b"
    assert not CONTROL.search(terminal(HOSTILE))


def test_markdown_cell_is_one_line_of_data():
    text = markdown_cell(HOSTILE)
    assert "\n" not in text and not RAW.search(text)
    assert text.startswith("&lt;iframe") and "\\| x \\|" in text
    assert markdown_cell("[x](javascript:alert(1))") == "[x]\\(javascript:alert(1))"
    assert markdown_cell("p < 0.05, 224 [153, 327]") == "p < 0.05, 224 [153, 327]"


def test_a_code_fence_is_longer_than_any_run_of_backticks_inside():
    assert fence_for("no ticks") == "```" and fence_for("a ``` b") == "````" and fence_for("`````") == "``````"
    block = code_fence("a: 1\n```\nb: ``````\n", "yaml")
    lines = block.splitlines()
    assert lines[0] == "```````yaml" and lines[-1] == "```````"
    assert all("```````" not in line for line in lines[1:-1])
    assert not CONTROL.search(code_fence(HOSTILE))  # a tag inside a code block is text


def test_csv_cells_are_never_formulas_or_controls():
    assert csv_cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)" and csv_cell("+1+2") == "'+1+2"
    assert csv_cell("-1.5") == "-1.5" and csv_cell(3.0) == 3.0 and csv_cell(None) is None
    assert csv_cell("a\nb\x1b") == "a\\x0ab\\x1b"


def _fences_balanced(text: str) -> bool:
    """Whether every fenced block closes with the fence that opened it (CommonMark: as many backticks or more)."""
    fence = None
    for line in text.splitlines():
        run = re.match(r"^(`{3,})", line)
        if fence is None and run:
            fence = run.group(1)
        elif fence is not None and run and len(run.group(1)) >= len(fence) and not line.strip("`"):
            fence = None
    return fence is None


def test_the_report_shows_every_hostile_string_as_data(hostile_results, capsys):
    assert main(["report", str(hostile_results)]) == 0
    err = capsys.readouterr().err
    assert not CONTROL.search(err)
    report = hostile_results / "report"
    pages = [report / "report.md", *sorted((report / "details").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert not CONTROL.search(text), f"{page.name}: {CONTROL.search(text)!r}"
        assert _fences_balanced(text), page.name
        outside = re.sub(r"^(`{3,}).*?^\1$", "", text, flags=re.M | re.S)  # a tag in a code block is text
        assert "<iframe" not in outside, page.name
    first = (report / "report.md").read_text()
    assert "&lt;iframe src=javascript:alert(1)>\\x1b]8;;http\\://evil\\x07link" in first  # the device, shown as data, no autolink
    runs = (report / "details" / "runs.md").read_text()
    assert (
        "&lt;iframe src=javascript:alert(1)>\\x1b]8;;http\\://evil\\x07link\\x1b]8;;\\x07\\x1b[2J\\u202eexe.txt\\x00```" in runs
    )
    environment = (report / "details" / "environment.md").read_text()
    block = environment[environment.index("## Scenario") :]
    assert block.splitlines()[2].startswith("`````yaml") and "</code><script>x</script>" in block  # fenced past ````
    for table in report.glob("*.csv"):
        text = table.read_text()
        assert not re.search("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f\u202e]", text), table.name
        assert not re.search(r"(^|,)[=@+]", text.replace("'=", "").replace("'@", "").replace("'+", "")), table.name


def test_compare_prints_a_records_words_as_data(hostile_results, capsys):
    code = main(["compare", str(hostile_results), str(DIGITS), "--allow-different-device"])
    out, err = capsys.readouterr()
    assert code == 1 and "REGRESSION" in out  # the failed run
    assert not RAW.search(out) and not CONTROL.search(err)
    assert "\\x1b]8;;http\\://evil\\x07link" in out and "\\u202eexe.txt\\x00" in out


def test_compare_refusing_other_devices_names_them_on_one_line(hostile_results, capsys):
    assert main(["compare", str(hostile_results), str(DIGITS)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and not CONTROL.search(err) and "timings of different devices" in err
