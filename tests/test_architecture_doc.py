"""ARCHITECTURE.md names the test that checks each of its invariants: every one it names exists."""

from __future__ import annotations

import re

from conftest import ROOT

NAMED = re.compile(r"tests/(test_\w+\.py)(?:::(\w+))?")


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
