"""The README's "Not supported yet" is the one list of gaps: every docs page that says something
is not there (a "not there / not done / not implemented / not supported" heading or bold label)
is linked from it, and the README has that section once."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GAP_MARKER = re.compile(
    r"^#+ (what is )?not (there|done|implemented|supported)\b"
    r"|\*\*Not (there yet|done|implemented|supported)",
    re.I | re.M,
)


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n## Not supported yet\n") == 1
    return readme.split("\n## Not supported yet\n", 1)[1].split("\n## ", 1)[0]


def test_every_page_that_names_a_gap_is_linked_from_the_readmes_list():
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", readme_section()))
    pages = {
        str(page.relative_to(ROOT))
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if GAP_MARKER.search(page.read_text(encoding="utf-8"))
    }
    assert pages, "no docs page names a gap: the marker no longer matches the docs"
    missing = sorted(pages - linked)
    assert not missing, f"README.md's 'Not supported yet' does not link {missing}"
