"""Every record string is data wherever it lands (issue 61, item 3): one escaping route per sink kind.

The sinks: markdown pages (``report.md``, the detail pages, ``tuning.md``), HTML inside them (``<summary>``, image
attributes), CSV cells (every table of the report, ``tuning.csv``), terminal lines (stdout, stderr, log lines,
library warnings), plot text and the report's file names. Their functions are :mod:`suite.config.escape`'s.

Two kinds of test:

- properties of each escaping function over arbitrary text (hypothesis): a markdown cell, parsed as CommonMark with
  tables (markdown-it-py), makes no HTML, link, image or heading and no autolink; a CSV cell is never a formula; a
  terminal line holds no control character; a file part is short ASCII;
- a generated list of hostile strings (:data:`HOSTILE`: HTML and script, ``</details><!--``, a ``# heading`` after a
  line break, a markdown image and link, bare URLs, ``=HYPERLINK`` / ``+cmd`` / ``@`` / ``-`` formulas, ESC, OSC-8,
  the right-to-left override, clear-screen, NUL, line breaks, 1,500 characters) planted in every string field of
  real records that the record reader accepts (warnings, notes, names, the dataset's name, the ruler, sweep keys
  and values), then ``suite report``, ``suite compare``, ``suite tune`` and ``suite scenarios`` run, and every page,
  CSV and terminal line they produce read back, each string asserted to land as data.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from test_escaping import DIGITS, RUNS, _fences_balanced, _set, _string_paths

from suite.cli import main
from suite.config.escape import FILE_PART_CHARS, csv_cell, file_part, html_text, markdown_cell, one_line, plot_text, shell_word
from suite.records.codec import check_record
from suite.records.record import SCHEMA_VERSION

HOSTILE = {
    "html": "<img src=x onerror=alert(1)><script>alert(1)</script>",
    "details": "</details><!-- hidden",
    "heading": "first line\n# heading-planted\n> quoted\n- listed",
    "image": "![planted](http://host.example/i.png)",
    "link": "[planted](http://host.example/) <http://host.example/>",
    "bare": "http://bare.example/x and www.bare.example",
    "hyperlink": '=HYPERLINK("http://host.example","x")',
    "cmd": "+cmd|' /C calc'!A0",
    "at": "@SUM(1+1)",
    "minus": "-2+3+cmd|' /C calc'!A0",
    "terminal": "\x1b]8;;http://host.example\x07osc-link\x1b]8;;\x07\x1b[2J\x1b[31m\u202eexe.txt\x07",
    "nul": "a\x00b",
    "breaks": "a\r\nb\rc\u2028d",
    "long": "L" * 1500,
}
"""The hostile strings of the issue, by name."""

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
"""What must never reach a terminal line or a page: controls (line breaks and tabs aside), separators, bidi."""
PLANTED_HOSTS = ("host.example", "bare.example")
FORMULA = ("=", "+", "-", "@")
PARSER = MarkdownIt("commonmark").enable("table")


def combined(first: str) -> str:
    """Every hostile string in one, ``first`` first (a CSV formula must open the cell), the long one left out."""
    return " ".join([HOSTILE[first], *(v for k, v in HOSTILE.items() if k not in (first, "long"))])


# --- properties of the escaping functions ---------------------------------------------------------------------------

TEXT = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=4),
        st.sampled_from(
            [
                "<",
                ">",
                "[",
                "]",
                "(",
                ")",
                "!",
                "#",
                "# ",
                "|",
                "`",
                "```",
                "\n",
                "\x1b",
                "://",
                "www.",
                "=",
                "-",
                "- ",
                "@",
                "1. ",
                " ",
            ]
        ),
    ),
    max_size=24,
).map("".join)
"""Text made of markdown's, a spreadsheet's and a terminal's special pieces among arbitrary characters."""


def _tokens(text: str):
    for token in PARSER.parse(text):
        yield token
        yield from token.children or []


def _live_markdown(text: str) -> list[str]:
    """What in ``text`` markdown would make live: HTML, links, images, headings, quotes, lists, autolinks."""
    found = [t.type for t in _tokens(text) if t.type in ("html_block", "html_inline", "link_open", "image", "heading_open")]
    found += [t.type for t in _tokens(text) if t.type in ("blockquote_open", "bullet_list_open", "ordered_list_open", "hr")]
    found += ["autolink"] * len(re.findall(r"(?i)(?<![\\])(?:[a-z][a-z0-9+.-]*://|(?<![\w.\\])www\.)", text))
    return found


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_a_markdown_cell_is_one_line_that_markdown_reads_as_text(text):
    cell = markdown_cell(text)
    assert "\n" not in cell and not CONTROL.search(cell)
    assert _live_markdown(cell) == [] and _live_markdown(f"- {cell}") == ["bullet_list_open"]  # the suite's list only
    table = PARSER.parse(f"| a | b |\n|---|---|\n| {cell} | x |\n")
    assert sum(t.type == "td_open" for t in table) == 2  # one cell, never a new column


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_csv_cells_terminal_lines_html_text_plot_text_and_file_parts_are_data(text):
    value = csv_cell(text)
    assert not CONTROL.search(value) and "\n" not in value and "\r" not in value
    assert not value.startswith(FORMULA) or _number(value)
    assert "\n" not in one_line(text) and not CONTROL.search(one_line(text))
    assert not re.search(r"[<>\"']", html_text(text)) and "\n" not in html_text(text)
    shown = plot_text(text)
    assert not CONTROL.search(shown) and "\n" not in shown and not re.search(r"(?<!\\)\$", shown)
    part = file_part(text)
    assert len(part) <= FILE_PART_CHARS and re.fullmatch(r"[A-Za-z0-9-]*", part)
    assert not CONTROL.search(shell_word(text)) and "\n" not in shell_word(text)


def test_a_shell_word_runs_nothing_when_pasted():
    assert shell_word("results/quickstar$(id)") == "'results/quickstar$(id)'"
    assert shell_word("results/quickstart") == "results/quickstart"


def test_long_names_stay_two_files():
    assert file_part("a" * 100 + "x") != file_part("a" * 100 + "y")
    assert file_part("classifier:digits") == "classifier-digits"  # a short name is what it was


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- every record string field, every sink ---------------------------------------------------------------------------

EXTRA_FIELDS = {
    "warnings": lambda text: [text],
    "host_load.contended": lambda text: True,
    "host_load.contention": lambda text: text,
    "quality.fid_note": lambda text: text,
    "quality.is_note": lambda text: text,
    "dataset.name": lambda text: text,
    "quality.features": lambda text: text,
    "error": lambda text: text,
    "reason": lambda text: text,
    "git_note": lambda text: text,
}
"""Fields the committed records leave empty, planted too (the issue's: warnings, the contention, the notes, the
dataset's name, the ruler)."""


def planted_records(text: str) -> tuple[list[dict], set[str]]:
    """The digits job's records of :data:`RUNS`, ``text`` planted in every string field the record reader accepts it
    in (and the fields of :data:`EXTRA_FIELDS`); the fields planted, by dotted path."""
    by_id = {r["run_id"]: r for r in json.loads(DIGITS.read_text())}
    planted: set[str] = set()
    out = []
    for run_id in RUNS:
        record = {**copy.deepcopy(by_id[run_id]), "schema": SCHEMA_VERSION}
        paths = [(path, text) for path in _string_paths(record) if "run_id" not in path]
        paths += [(tuple(name.split(".")), make(text)) for name, make in EXTRA_FIELDS.items()]
        for path, value in paths:
            trial = copy.deepcopy(record)
            _set(trial, path, value)
            try:
                check_record(trial, "r.json")
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # a field the reader checks (a safe name, a digest, a registry's name): refused, never shown
            record = trial
            planted.add(".".join(map(str, path)))
        out.append(record)
    return out, planted


def _results(root: Path, records: list[dict]) -> Path:
    for record in records:
        (root / record["run_id"]).mkdir(parents=True)
        (root / record["run_id"] / "result.json").write_text(json.dumps(record))
    return root


VARIANTS = {"formula-first": combined("hyperlink"), "heading-first": combined("heading"), "long": "+" + HOSTILE["long"]}


@pytest.fixture(scope="module", params=list(VARIANTS))
def planted(request, tmp_path_factory):
    records, fields = planted_records(VARIANTS[request.param])
    return _results(tmp_path_factory.mktemp(request.param) / "results", records), fields


def test_the_planted_strings_reach_the_fields_of_the_issue(planted):
    _, fields = planted
    assert {"warnings", "host_load.contention", "quality.fid_note", "dataset.name", "quality.features"} <= fields
    assert {"device", "machine.cpu_model", "machine.host", "error", "launcher"} <= fields
    assert len(fields) >= 40  # every string field of the record the reader lets through, not a chosen few


def _page_problems(text: str) -> list[str]:
    """What on a markdown page is not data: controls, unbalanced fences, HTML, links, images, headings or autolinks
    that a planted string made."""
    problems = [f"control {m.group()!r}" for m in CONTROL.finditer(text)]
    if not _fences_balanced(text):
        problems.append("a code fence left open")
    outside = re.sub(r"^(`{3,}).*?^\1$", "", text, flags=re.M | re.S)  # a code block is text
    for token in _tokens(outside):
        content = token.content or ""
        if token.type in ("html_block", "html_inline") and re.search(r"onerror|<script|<!--|host\.example", content):
            problems.append(f"live HTML {content[:60]!r}")
        if token.type in ("link_open", "image") and any(h in str(token.attrs) for h in PLANTED_HOSTS):
            problems.append(f"a planted {token.type} {token.attrs}")
        if token.type == "inline" and re.search(r"^heading-planted", content):
            problems.append("a planted heading or block")
    prose = re.sub(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", "", outside)  # nor is a code span, never autolinked
    problems += [f"autolink {m.group()!r}" for m in re.finditer(r"(?<!\\)(?:://|www\.)(?:host|bare)\.example", prose)]
    problems += ["planted HTML outside code"] * len(re.findall(r"<script|<img src=x|<!-- hidden|</details><!--", prose))
    problems += [f"a planted heading {h[:40]!r}" for h in _headings(outside) if h.startswith("heading-planted")]
    return problems


def _headings(text: str) -> list[str]:
    tokens = list(PARSER.parse(text))
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def _csv_problems(path: Path) -> list[str]:
    problems = []
    for row in csv.reader(io.StringIO(path.read_text())):
        for value in row:
            if CONTROL.search(value) or "\n" in value:
                problems.append(f"{path.name}: a control or line break in {value[:40]!r}")
            if value.startswith(FORMULA) and not _number(value):
                problems.append(f"{path.name}: a formula {value[:40]!r}")
    return problems


def _terminal_problems(text: str) -> list[str]:
    return [f"control {m.group()!r} in {line[:60]!r}" for line in text.splitlines() for m in CONTROL.finditer(line)]


def test_the_report_reads_every_planted_string_as_data(planted, capsys):
    results, _ = planted
    assert main(["report", str(results)]) == 0  # a 1,500-character ruler is no file name too long
    out, err = capsys.readouterr()
    assert _terminal_problems(out + err) == []
    report = results / "report"
    pages = [report / "report.md", *sorted((report / "details").glob("*.md"))]
    assert len(pages) > 10
    for page in pages:
        text = page.read_text()
        assert _page_problems(text) == [], page.name
        assert not any(h.startswith("heading-planted") for h in _headings(text)), page.name  # a file name may quote it
    tables = sorted(report.glob("**/*.csv"))
    assert tables and [p for t in tables for p in _csv_problems(t)] == []
    assert all(len(p.name.encode()) < 128 for p in report.rglob("*"))  # no record string makes a long file name
    figures = (report / "details" / "figures.md").read_text()
    assert all(not re.search(r"\]\((?!\.\./|[\w-]+\.png)", line) for line in figures.splitlines() if line.startswith("!["))


def test_compare_prints_every_planted_string_as_data(planted, capsys):
    results, _ = planted
    main(["compare", str(results), str(DIGITS), "--allow-different-device"])
    out, err = capsys.readouterr()
    assert _terminal_problems(out + err) == [] and _page_problems(out) == []


def _tuning_records(text: str) -> list[dict]:
    from test_tuning import CGAN, run

    sweep = {text: 0.001, "train.lr": text}
    records = [run(CGAN, sweep, 0, seed, fid) for seed, fid in ((10, 90.0), (11, 80.0))]
    for record in records:  # a run id is a safe name, checked where it is read: the sweep is planted, not the id
        record["run_id"] = f"conditional-bce-horovod-planted-p2-s{record['seed']}-r0"
    return records


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tune_writes_sweep_keys_and_values_as_data(tmp_path, capsys, variant):
    from test_tuning import write

    results = write(tmp_path, _tuning_records(VARIANTS[variant]))
    code = main(["tune", str(results), "--out", str(tmp_path / "t")])
    out, err = capsys.readouterr()
    assert _terminal_problems(out + err) == []
    if code != 0:  # a sweep key the records refuse: one line naming it
        assert code == 2 and len(err.strip().splitlines()) == 1
        return
    assert _csv_problems(tmp_path / "t" / "tuning.csv") == []
    header = next(csv.reader(io.StringIO((tmp_path / "t" / "tuning.csv").read_text())))
    assert all(not h.startswith(FORMULA) for h in header)
    assert _page_problems((tmp_path / "t" / "tuning.md").read_text()) == []


def test_a_line_break_in_an_argument_keeps_a_refusal_on_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "no\nsuch\x1b[2J")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and not CONTROL.search(err)


def test_did_you_mean_quotes_a_folder_name_beside_commands_to_copy(tmp_path, capsys):
    (tmp_path / "quickstar$(id)").mkdir()
    assert main(["report", str(tmp_path / "quickstart")]) == 2
    err = capsys.readouterr().err
    assert f"did you mean '{tmp_path}/quickstar$(id)'?" in err


def test_suite_scenarios_prints_a_description_as_one_line_of_data(tmp_path, monkeypatch, capsys):
    from suite.config import builtin

    # YAML's escapes: ESC, an OSC-8 link, BEL, clear-screen, the right-to-left override, a line separator
    (tmp_path / "planted.yaml").write_text(
        'description: "\\e]8;;http://host.example\\aosc-link\\e]8;;\\a\\e[2J\\u202eexe \\L next"\n'
    )
    real = builtin.builtin_scenarios
    monkeypatch.setattr(builtin, "builtin_scenarios", lambda: real(tmp_path))
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert _terminal_problems(out) == [] and "\\x1b]8;;http://host.example\\x07osc-link" in out.splitlines()[0]


def test_a_glyph_warning_quoting_a_record_reaches_the_terminal_escaped(tmp_path):
    import subprocess
    import sys

    script = (
        "import warnings; from suite.cli import main; main(['schema']);"
        "warnings.warn('Glyph 27 (\\x1b[2J) missing from font(s) DejaVu Sans.', UserWarning)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "Glyph 27" in done.stderr and _terminal_problems(done.stderr) == []
    assert "\\x1b[2J" in done.stderr


def test_plot_text_leaves_matplotlib_no_glyph_to_miss():
    import warnings

    from suite.analysis.plot_parts import pyplot

    fig, ax = pyplot().subplots()
    ax.set_title(plot_text(HOSTILE["terminal"] + " $\\frac{1}{$"))  # a control and a malformed mathtext
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png")
    assert [str(w.message) for w in caught if "Glyph" in str(w.message)] == []


def test_a_log_line_quoting_a_record_stays_one_line(tmp_path):
    import subprocess
    import sys

    script = (
        "import logging; from suite.cli import main; main(['schema']);"
        "logging.getLogger('suite').warning('skipped %s', 'run\\nerror: forged line\\x1b[2J')"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.stderr.strip().splitlines() == ["skipped run error: forged line\\x1b[2J"]
