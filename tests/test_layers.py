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


# Renaming a finished temporary file or folder over an artifact is the io layer's job alone.
RENAMES = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")}


def test_only_the_io_layer_renames_files_into_place():
    bad = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        if path == ROOT / "pipeline" / "core" / "io.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            f = node.func
            owner = f.value.id if isinstance(f.value, ast.Name) else None
            # Path.rename / Path.replace take one path argument; str.replace takes two.
            path_rename = f.attr in ("rename", "replace") and len(node.args) == 1
            if (owner, f.attr) in RENAMES or (path_rename and owner not in ("os", "shutil")):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not bad, "use pipeline.core.io (atomic_path / atomic_dir):\n" + "\n".join(bad)


def test_every_library_module_holds_one_concept_in_at_most_600_lines():
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in sorted((ROOT / "pipeline").rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > 600
    ]
    assert not long, "split by concept:\n" + "\n".join(long)
