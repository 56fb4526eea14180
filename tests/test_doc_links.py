"""Every relative link of the README and of the pages in docs/ points at a file that exists.

The site build (`mkdocs build --strict` in CI) checks the links between the pages, headings
included; the README is not one of the site's pages, so its links are checked here, and the
pages' links to files outside docs/ too (the build cannot see those)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# [text](target) and <img src="target">, outside code spans.
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img [^>]*src=\"([^\"]+)\"")


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = [a or b for a, b in LINK.findall(text)]
    return [t for t in targets if not re.match(r"^[a-z]+:|^#", t)]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_points_at_a_file_that_exists(path: Path) -> None:
    missing = [t for t in relative_links(path) if not (path.parent / t.split("#", 1)[0]).exists()]
    assert missing == [], f"{path.relative_to(REPO)} links to files that do not exist"


def test_the_readme_links_to_the_documentation_and_the_check_sees_those_links() -> None:
    links = relative_links(REPO / "README.md")
    assert "docs/index.md" in links
    assert "docs/settings.md" in links
    assert "docs/assets/pipeline.png" in links
    assert relative_links(REPO / "docs" / "index.md")  # the pages' links are found too


@pytest.mark.parametrize("path", DOCUMENTS[1:], ids=lambda p: p.relative_to(REPO).as_posix())
def test_pages_show_pictures_with_markdown_images_which_the_site_rewrites(path: Path) -> None:
    # The site puts each page in a folder of its own (settings.md -> settings/index.html) and
    # rewrites Markdown links to match; a raw <img src="assets/..."> would point at nothing there.
    assert "<img " not in path.read_text(encoding="utf-8"), f"{path.name}: use ![alt](assets/...)"


def test_ci_builds_the_site_strictly_from_the_docs_extra() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[docs]'" in ci
    assert re.search(r"mkdocs build --strict\b.*--site-dir", ci), "CI must build the site with --strict"
    mkdocs = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^docs_dir: docs$", mkdocs, flags=re.M)
    assert re.search(r"^strict: true$", mkdocs, flags=re.M)
