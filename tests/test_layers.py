"""Imports point one way: cli -> flows -> pipeline -> schemas, and inside
pipeline/ down a declared order of its packages. Checked on every import statement,
function-level ones included, by parsing the sources."""

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


# Inside pipeline/: the packages (and the two top-level modules) by level, lowest first. A
# module may import its own package and packages of lower levels only, never a sibling of its
# level nor anything above (function-level imports included), so no two packages form a cycle.
# Why this order: models, retrieval and the KG under the agents that use them; the store the
# stages write under the selector that plans over it; the run's context under the stages' work;
# the catalog's read side over what they wrote; stages.py, which wires them, on top.
PACKAGE_LEVELS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("executors", "llm"),
    ("retrieval",),
    ("kg",),
    ("agents",),
    ("store",),
    ("selector",),
    ("run_context",),
    ("generation", "quality"),
    ("catalog", "browse"),
    ("stages",),
)
LEVEL = {pkg: i for i, level in enumerate(PACKAGE_LEVELS) for pkg in level}


def imported_pipeline_packages(path: Path) -> set[tuple[str, int]]:
    """(package inside pipeline/, line) of every import of pipeline.<package>..."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from pipeline import stages` names the package in the imported name.
            names = [f"pipeline.{a.name}" for a in node.names] if node.module == "pipeline" else []
            names = names or [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "pipeline" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


def package_of(path: Path) -> str:
    rel = path.relative_to(ROOT / "pipeline")
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_every_package_inside_pipeline_has_a_level():
    packages = {package_of(p) for p in (ROOT / "pipeline").rglob("*.py")} - {"__init__"}
    assert packages == set(LEVEL), f"declare a level in PACKAGE_LEVELS: {packages ^ set(LEVEL)}"


def test_a_pipeline_package_imports_only_itself_and_lower_levels():
    bad = [
        f"{path.relative_to(ROOT)}:{line} ({pkg}, level {LEVEL[pkg]}) imports pipeline.{dep} "
        f"(level {LEVEL.get(dep, '?')})"
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if (pkg := package_of(path)) != "__init__"
        for dep, line in sorted(imported_pipeline_packages(path))
        if dep != pkg and not LEVEL.get(dep, len(PACKAGE_LEVELS)) < LEVEL[pkg]
    ]
    assert not bad, "imports point down (PACKAGE_LEVELS):\n" + "\n".join(bad)


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
        for layer in ("pipeline", "schemas")
        for p in sorted((ROOT / layer).rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > 600
    ]
    assert not long, "split by concept:\n" + "\n".join(long)


def test_no_library_function_is_over_120_lines():
    long = []
    for p in sorted((ROOT / "pipeline").rglob("*.py")):
        rel = str(p.relative_to(ROOT))
        for node in ast.walk(ast.parse(p.read_text(), filename=rel)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            n = node.end_lineno - node.lineno + 1  # from `def` to its last line
            if n > 120:
                long.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not long, "split into named steps:\n" + "\n".join(long)
