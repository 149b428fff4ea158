"""Prove that a code change left a landed run's outputs unchanged: the run report (report.md
and its plots) and every export file, written by a base revision and by the working tree from
the same catalog, compared by sha256.

    .venv/bin/python scripts/compare_outputs.py --base 0293aca \\
        --set store.out_dir=/tmp/identity/store --set store.catalog=/tmp/identity/catalog.duckdb \\
        --run-id identity

The base revision is checked out as a detached git worktree and run with this checkout's
virtual environment (its pins must match). Each side writes the report into the store (one
after the other) and an export with every format into its own directory. manifest.json of an
export records when and by which commit it was made, so it is compared with those fields left
out. Exit status 0 when everything matches, 1 otherwise (each difference is printed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOLATILE = {("created_at",), ("finished_at",), ("code", "git_commit"), ("code", "argv")}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(src: Path, args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "cli", *args]
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{src}: {' '.join(args[:1])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def stable_manifest(path: Path) -> dict:
    data = json.loads(path.read_text())
    for keys in VOLATILE:
        node = data
        for k in keys[:-1]:
            node = node.get(k, {})
        node.pop(keys[-1], None)
    for f in data.get("files", []):  # the card names its folder: compared on its own, normalised
        if f.get("path") == "README.md":
            f.pop("sha256", None)
            f.pop("bytes", None)
    return data


def flat(node: object, prefix: str = "") -> dict[str, str]:
    if isinstance(node, dict):
        out: dict[str, str] = {}
        for k, v in node.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: json.dumps(node, sort_keys=True)}


def outputs(src: Path, settings: list[str], run_id: str, work: Path) -> dict[str, str]:
    """Write the report and an export with `src`'s code; sha256 of every file, by name."""
    sets = [a for s in settings for a in ("--set", s)]
    cli(src, ["report", "--run-id", run_id, *sets])
    store = Path(next(s.split("=", 1)[1] for s in settings if s.startswith("store.out_dir=")))
    report_dir = store / "runs" / run_id / "report"
    export = work / "export"
    fmts = [a for f in ("verl", "hf", "jsonl") for a in ("--format", f)]
    cli(src, ["export", str(export), "--run-id", run_id, *fmts, *sets])
    out = {f"report/{p.name}": sha256(p) for p in sorted(report_dir.iterdir()) if p.is_file()}
    for p in sorted(export.rglob("*")):
        if p.is_file():
            rel = p.relative_to(export).as_posix()
            if rel == "manifest.json":
                fields = flat(stable_manifest(p))
                out.update({f"export/manifest.json:{k}": v for k, v in fields.items()})
            elif rel == "README.md":  # the card's commands name the export folder itself
                text = p.read_text().replace(str(export), "<export>")
                out[f"export/{rel}"] = hashlib.sha256(text.encode()).hexdigest()
            else:
                out[f"export/{rel}"] = sha256(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="git revision to compare against")
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--set", dest="settings", action="append", default=[], required=True)
    ap.add_argument(
        "--allow-manifest-field",
        action="append",
        default=[],
        help="a manifest.json field (dotted) expected to change, e.g. dedupe.key",
    )
    args = ap.parse_args()
    if not any(s.startswith("store.out_dir=") for s in args.settings):
        ap.error("--set store.out_dir=... is required (the landed store)")
    with tempfile.TemporaryDirectory(prefix="compare-outputs-") as tmp:
        base_src = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base_src), args.base],
            cwd=ROOT,
            check=True,
        )
        try:
            (Path(tmp) / "a").mkdir()
            (Path(tmp) / "b").mkdir()
            before = outputs(base_src, args.settings, args.run_id, Path(tmp) / "a")
            after = outputs(ROOT, args.settings, args.run_id, Path(tmp) / "b")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_src)], cwd=ROOT)
            shutil.rmtree(base_src, ignore_errors=True)
    differ, allowed = 0, {f"export/manifest.json:{f}" for f in args.allow_manifest_field}
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if name.startswith("export/manifest.json:"):
            if a != b:
                verdict = "allowed" if name in allowed else "DIFFERS"
                differ += name not in allowed
                print(f"{verdict:8} {name}: {a} -> {b}")
            continue
        same = a == b
        differ += not same
        print(f"{'same' if same else 'DIFFERS':8} {name}  {(a or '-')[:16]}  {(b or '-')[:16]}")
    n_files = sum(not k.startswith("export/manifest.json:") for k in after)
    print(f"\n{n_files} files and the manifest's stable fields compared; {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
