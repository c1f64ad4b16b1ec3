"""The documentation users get is in the repository: no file points at a design document
that is not shipped, and every relative link in the README and docs/ resolves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("examples/**/*.md"))]


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / n for n in names.splitlines() if not n.endswith((".png", ".jpg", ".whl"))]


def test_nothing_points_at_an_unshipped_design_document() -> None:
    offenders = []
    for path in tracked_text_files():
        if path == Path(__file__) or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if re.search(r"\bDESIGN\b|\.\./shared/|/work/shared", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_relative_links_resolve(doc: Path) -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text())
    missing = [link for link in links if "://" not in link and not (doc.parent / link).exists()]
    assert missing == []
