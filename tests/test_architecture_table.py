"""docs/architecture.md's table names the rooms as they are: every module it names exists
in that part's folder, and the parts that list their modules list every one of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "operator" / "kopfsched"
LISTS_EVERY_MODULE = ("framework", "queue", "cache", "scheduler", "config", "kube")


def table_rows() -> dict[str, str]:
    """part → its row of docs/architecture.md's table of rooms."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`operator/kopfsched/"):
            rows[cells[0]] = line
    return rows


def modules(part: str) -> set[str]:
    return {p.name for p in (PACKAGE / part).glob("*.py") if p.name != "__init__.py"}


@pytest.mark.parametrize("part", LISTS_EVERY_MODULE)
def test_the_row_names_each_module_of_its_folder_and_no_other(part: str) -> None:
    named = set(re.findall(r"`([a-z_]+\.py)`", table_rows()[part]))
    assert named == modules(part)
