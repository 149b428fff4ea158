"""MkDocs hook (mkdocs.yml `hooks:`): the reference pages, generated from the code at every
build (cli/reference.py), added to the site as if they were files under docs/reference/;
and docs/testing.md in the navigation when the page exists."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

from cli.reference import benchmarks_markdown, catalog_markdown, cli_markdown, config_markdown

PAGES = {
    "reference/cli.md": cli_markdown,
    "reference/configuration.md": config_markdown,
    "reference/catalog.md": catalog_markdown,
    "reference/benchmarks.md": benchmarks_markdown,
}
OPTIONAL = {"Testing": "testing.md"}  # nav title -> page, listed before the reference


def on_config(config):
    nav = config["nav"]
    for title, page in OPTIONAL.items():
        if (Path(config["docs_dir"]) / page).is_file() and {title: page} not in nav:
            nav.insert(len(nav) - 1, {title: page})
    return config


def on_files(files: Files, config) -> Files:
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files
