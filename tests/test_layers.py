"""Imports point one way: cli -> flows -> pipeline -> schemas (issue 14, item 1). Checked on
every import statement, function-level ones included, by parsing the sources."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What each layer must not import (anything above it, and the tools of the layers above).
FORBIDDEN = {
    "pipeline": {"cli", "flows", "prefect", "prefect_ray", "typer"},
    "flows": {"cli", "typer"},
    "schemas": {"cli", "flows", "pipeline", "prefect", "typer"},
}


def imported_roots(path: Path) -> set[tuple[str, int]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {(a.name.split(".")[0], node.lineno) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {root}"
        for path in sorted((ROOT / layer).rglob("*.py"))
        for root, line in sorted(imported_roots(path))
        if root in FORBIDDEN[layer]
    ]
    assert not bad, "\n".join(bad)
