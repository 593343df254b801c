"""ARCHITECTURE.md names the test that checks each of its invariants: every one it names exists.

It stays easy to scan: no paragraph, and no list item, is over 120 words.
"""

from __future__ import annotations

import re

from conftest import ROOT

NAMED = re.compile(r"tests/(test_\w+\.py)(?:::(\w+))?")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
FENCE = "```"
MOST_WORDS = 120


def test_every_test_architecture_md_names_exists():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    named = NAMED.findall(text)
    assert len(named) >= 30  # the invariants and the code map cite their tests
    missing = []
    for file, function in named:
        path = ROOT / "tests" / file
        if not path.exists():
            missing.append(file)
        elif function and not re.search(rf"^(?:async )?def {function}\(", path.read_text(), re.MULTILINE):
            missing.append(f"{file}::{function}")
    assert not missing, f"ARCHITECTURE.md names tests that do not exist: {missing}"


def blocks(markdown: str) -> list[str]:
    """The text's paragraphs, one string each: a blank line, a heading or a list item starts a new one
    (each list item is a block of its own), and fenced code is left out."""
    found: list[str] = []
    lines: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        fence = line.lstrip().startswith(FENCE)
        if lines and (fence or not line.strip() or line.startswith("#") or LIST_ITEM.match(line)):
            found.append(" ".join(lines))
            lines = []
        if fence:
            fenced = not fenced
        elif line.strip() and not fenced:
            lines.append(line.strip())
    if lines:
        found.append(" ".join(lines))
    return found


def test_blocks_counts_each_list_item_alone_and_skips_fenced_code():
    text = "# Title\n\nOne paragraph\nover two lines.\n\n- an item\n  wrapped\n- another\n\n```\nx = 1\n\ny = 2\n```\nLast."
    assert blocks(text) == ["# Title", "One paragraph over two lines.", "- an item wrapped", "- another", "Last."]


def test_no_paragraph_of_architecture_md_is_over_120_words():
    found = blocks((ROOT / "ARCHITECTURE.md").read_text())
    assert len(found) >= 50  # the code map's modules each have their own paragraph
    too_long = [
        f"{len(block.split())} words: {' '.join(block.split()[:8])} ..."
        for block in found
        if len(block.split()) > MOST_WORDS
    ]
    assert not too_long, f"ARCHITECTURE.md has blocks over {MOST_WORDS} words, split them: {too_long}"
