"""One name for the papers: "paper 000" to "paper 003" in the docs, the code's words, the plots and the reports made
from committed records; "seed" is a random seed (a training draw), never a paper."""

import re

from conftest import REPO
from suite.analysis.projection.render import paper_points
from suite.analysis.report import DEFAULT_BASELINES
from suite.analysis.report.paper_pages import paper_page
from suite.analysis.report.papers import PAPERS

OLD_NAME = re.compile(r"\b[Ss]eeds? 00\d\b|\b[Ss]eed papers?\b|\bthe seed's text\b")
"""A paper called a seed: ``seed 001``, ``Seed 000's``, ``seeds 001 and 003``, ``the seed papers``."""
WRITTEN = [
    "README.md",
    "Makefile",
    "docs/**/*.md",
    "baselines/*",
    "scenarios/**/*.yaml",
    "suite/**/*.py",
    "ci/**/*.py",
    "reports/digits/**/*.md",
    "reports/papers/*/papers.md",
]
"""What a reader reads: the docs, the papers' numbers, the scenarios, every string and docstring of the code, and the
report pages regenerated from committed records (``suite report``, ``suite papers``). The per-scenario pages under
``reports/papers/*/paper00N-*/`` and ``reports/gpu-h100/`` were written by older versions from run folders kept
elsewhere, and are left as they were made."""


def test_no_paper_is_called_a_seed_anywhere_a_reader_reads():
    files = sorted({path for pattern in WRITTEN for path in REPO.glob(pattern) if path.is_file()})
    assert len(files) > 100
    found = [
        f"{path.relative_to(REPO)}:{number}: {match.group(0)}"
        for path in files
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for match in OLD_NAME.finditer(line)
    ]
    assert not found, "papers are 'paper 000' to 'paper 003':\n" + "\n".join(found[:40])


def test_the_papers_pages_and_plot_legends_name_them_paper_00n():
    assert [p.name for p in PAPERS.values()] == ["paper 000", "paper 001", "paper 002", "paper 003"]
    page = paper_page(PAPERS["paper002"], [], DEFAULT_BASELINES)
    assert page.startswith("# Paper 002, Lupo Pasini and Yin, Stable Parallel Training of Wasserstein Conditional GANs:")
    assert "the paper's text is the abstract" in page
    sources = set(paper_points(DEFAULT_BASELINES)["source"])  # the projection plot's legend
    assert "paper 001 (Perez et al.), MNIST, grid 4x4" in sources
    assert not any(OLD_NAME.search(s) for s in sources)


def test_the_pattern_catches_the_old_names_and_spares_random_seeds():
    for old in ("seed 001 (Perez et al.)", "Seed 000, Inception Score", "seeds 001 and 003", "the seed papers' numbers"):
        assert OLD_NAME.search(old), old
    for fine in ("3 seeds", "seed 0", "seeds 0, 1, 2", "paper000-quality", "seed001_cellular_speedups.csv", "paper 001"):
        assert not OLD_NAME.search(fine), fine
