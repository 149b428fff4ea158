"""`python -m cli` runs the `curriculum` command."""

from cli.main import run

run()
