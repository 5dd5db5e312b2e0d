"""Every relative link in the README and docs/ points at a file that exists and, with a #fragment, at a
heading of that file (GitHub's anchor rules), so a newcomer following the docs never lands nowhere."""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """GitHub's slug: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"^#{1,6}\s+(.*)", line)
        if m:
            slug = github_anchor(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(found)


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    return broken


def test_anchor_rules_match_github():
    assert github_anchor("The default arm on the defaults of 2026-12-07 (10 seeds)") == (
        "the-default-arm-on-the-defaults-of-2026-12-07-10-seeds")
    assert github_anchor("Ray: one node and two (`bench/ray_nodes.py`)") == "ray-one-node-and-two-benchray_nodespy"


def test_a_broken_link_is_found(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n[ok](#title) [gone](#nowhere) [file](b.md)\n")
    assert broken_links(doc) == ["#nowhere (no such heading)", "b.md (no such file)"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    assert broken_links(doc) == []
