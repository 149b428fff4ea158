"""The `curriculum` command line: typer commands over `flows/` (orchestration) and `pipeline/`
(the library). Nothing below imports this package."""
