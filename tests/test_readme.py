"""The README's commands work: every fenced `curriculum …` command of its Quick start runs
against the session's landed run (a copy of it) and exits 0. A path under `data/out/`, the
demo's store, names the copy's store instead."""

import re
import shlex

from tests.conftest import ROOT, landed_copy, run_cli

STORE = "data/out"


def quick_start_commands() -> list[list[str]]:
    """The arguments of each `curriculum` (or `.venv/bin/curriculum`) line in the fenced
    blocks of the README's `## Quick start` section, comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", section, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            args = shlex.split(line, comments=True)
            if args and args[0].split("/")[-1] == "curriculum":
                commands.append(args[1:])
    return commands


def test_the_quick_start_lists_curriculum_commands():
    commands = quick_start_commands()
    assert len(commands) >= 4
    assert {c[0] for c in commands} >= {"sql", "export"}


def test_every_quick_start_command_runs_against_the_landed_run(tmp_path, landed_run):
    out, settings = landed_copy(landed_run, tmp_path)
    sets = [arg for s in settings for arg in ("--set", s)]
    for args in quick_start_commands():
        args = [str(out) + a[len(STORE) :] if a.startswith(STORE + "/") else a for a in args]
        res = run_cli(*args, *sets)
        assert res.returncode == 0, f"curriculum {shlex.join(args)}\n{res.stderr[-2000:]}"
        assert res.stdout.strip(), f"curriculum {shlex.join(args)} printed nothing"
