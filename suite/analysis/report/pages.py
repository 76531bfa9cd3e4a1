"""The report's pages: ``report.md``, the first page, and the detail pages beside it in ``details/``.

A section is written as markdown lines whose local links (figures, samples, traces, other pages) are
relative to the report folder, whatever page it ends up on; :func:`page_text` rebases them for a page
one folder down, so a section can move between pages without its links breaking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .section import Section

DETAILS = "details"
"""The folder of the detail pages, beside report.md."""

LOCAL_LINK = re.compile(r'(\]\(|src=")(?![a-z][a-z0-9+.-]*:|/|#)')
"""The start of a relative link target: a markdown link or image, or an HTML ``src``."""
FIGURE = re.compile(r"^!\[([^\]]*)\]\((?![a-z][a-z0-9+.-]*:|/)([^)\s:]+\.png)\)$", re.M | re.I)
"""A figure the report drew: a markdown image on its own line whose file is a local PNG (a record's words, escaped
where they land, never make one; nor does an image of another site)."""


@dataclass(frozen=True)
class Page:
    """A detail page: its file name (without ``.md``), title, the line the index says of it, and what it shows."""

    name: str
    title: str
    summary: str
    section: Section

    @property
    def lines(self) -> list[str]:
        """The page's markdown lines (its section's)."""
        return self.section.lines

    @property
    def link(self) -> str:
        """The page relative to the report folder."""
        return f"{DETAILS}/{self.name}.md"


def page_text(page: Page) -> str:
    """A detail page's markdown: its title, a link back to the report, and its sections with rebased links.

    A first section whose heading repeats the title is not repeated.
    """
    lines = list(page.lines)
    if lines and lines[0].strip() == f"## {page.title}":  # the title says it; its subsections move up a level
        lines = [line[1:] if line.startswith("###") else line for line in lines[1:]]
    text = "\n".join([f"# {page.title}\n", "Part of [the report](report.md); every table is also a CSV beside it.\n", *lines])
    return LOCAL_LINK.sub(r"\1../", text)


def index_section(pages: list[Page]) -> list[str]:
    """The first page's last section: one line per detail page."""
    return ["## Details\n", *(f"- [{page.title}]({page.link}): {page.summary}" for page in pages), ""]


def figures(pages: list[Page]) -> list[tuple[str, str, Page]]:
    """Every figure the pages embed, once each, in page order: (file, alt text, page)."""
    seen: dict[str, tuple[str, str, Page]] = {}
    for page in pages:
        for alt, file in FIGURE.findall("\n".join(page.lines)):
            seen.setdefault(file, (file, alt, page))
    return list(seen.values())


def key_figures(found: list[tuple[str, str, Page]], keys: tuple[str, ...], most: int) -> list[tuple[str, str, Page]]:
    """The figures the first page shows: those whose file name starts with one of ``keys``, in the keys' order."""
    ranked = sorted(
        (figure for figure in found if any(Path(figure[0]).name.startswith(key) for key in keys)),
        key=lambda figure: next(i for i, key in enumerate(keys) if Path(figure[0]).name.startswith(key)),
    )
    return ranked[:most]


def figures_page(found: list[tuple[str, str, Page]]) -> list[str]:
    """Every figure of the report with the page that explains it."""
    if not found:
        return []
    lines = []
    for file, alt, page in found:
        lines += [f"## {alt or file}\n", f"![{alt}]({file})\n", f"From [{page.title}]({page.link}).\n"]
    return lines
