"""The documentation holds to the code: the generated references list every configuration key
(each of configs/production.yaml's among them), every command, view and table; the README fits
on a screen; and the product's text speaks of the product, not of how it was built."""

import re
import subprocess

import yaml
from pydantic import BaseModel

from cli.reference import (
    catalog_markdown,
    cli_commands,
    cli_markdown,
    config_keys,
    config_markdown,
    sql_objects,
)
from pipeline.core.config import PipelineConfig
from schemas.tables import TABLES
from tests.conftest import ROOT


def profile_keys(doc: dict, model: type[BaseModel] = PipelineConfig, prefix: str = "") -> list:
    """A profile's dotted keys, down to the model's settings (a map-valued setting such as
    selector.hop_weights is one key)."""
    keys = []
    for name, value in doc.items():
        key, field = f"{prefix}{name}", model.model_fields[name]
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel) and isinstance(value, dict):
            keys += profile_keys(value, sub, f"{key}.")
        else:
            keys.append(key)
    return keys


def test_the_configuration_reference_documents_every_key_of_the_production_profile():
    reference = config_markdown()
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([\w.]+)` \| (.*)$", reference, re.MULTILINE)}
    production = yaml.safe_load((ROOT / "configs" / "production.yaml").read_text())
    wanted = profile_keys(production)
    assert len(wanted) > 50
    assert [k for k in wanted if k not in rows] == []
    # every key of the models: a row, or a section's heading
    assert [k for k in config_keys() if k not in rows and f"# `{k}`" not in reference] == []
    # every setting has a doc (its last cell) and a type
    undocumented = [k for k, row in rows.items() if row.rstrip(" |").endswith("|")]
    assert undocumented == []


def test_the_cli_reference_lists_every_command():
    reference = cli_markdown()
    commands = cli_commands()
    assert {"curriculum nightly", "curriculum index build", "curriculum runs prune"} <= set(
        commands
    )
    missing = [c for c in commands[1:] if f"`{c}`" not in reference]
    assert missing == []
    assert "--verbose" in reference and "&lt;run id&gt;" in reference  # escaped, not a tag


def test_the_catalog_reference_lists_every_view_macro_and_table():
    reference = catalog_markdown()
    objects = sql_objects()
    assert {"funnel", "accepted", "curriculum_verdicts"} <= {name for _, name, _ in objects}
    assert [n for _, n, _ in objects if f"| `{n}` |" not in reference] == []
    assert [t for t in TABLES if f"### `{t}`" not in reference] == []


def test_the_readme_fits_on_a_screen():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)


# How the project was built is git's and CHANGELOG.md's to tell, not the product's text.
HISTORY = re.compile(
    r"\bsessions? \d|\bhelper[- ]\d|\bissues? \d|\bturn-\d|\bs\d\d_\w+\.log",
    re.IGNORECASE,
)
TEXT = (".py", ".md", ".sql", ".yaml", ".yml", ".toml", ".txt", ".html", ".css", "Makefile")


def test_the_product_text_names_no_project_history():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = [
        f"{path}:{i}: {line.strip()[:100]}"
        for path in tracked
        if path.endswith(TEXT) and path != "CHANGELOG.md" and (ROOT / path).is_file()
        for i, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert found == [], "\n".join(found)
