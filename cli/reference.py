"""The documentation's reference pages, generated from the code so they cannot drift from it:
the command line from the typer app (what `--help` prints, through typer's own docs
generator), the configuration from the pydantic models (every key with its type, default,
bounds and doc, the doc being the field's description or the comment above it in
pipeline/core/config.py), and the catalog from the table contracts (schemas/) and views.sql
(each view and macro with the comment above it). `make docs` renders them (the mkdocs hook
scripts/docs_hooks.py); tests/test_docs.py holds them to configs/production.yaml and the
commands.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
import types
import typing
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

FENCE = re.compile(r"^\s*(```|~~~)")


def escape_html(markdown: str) -> str:
    """`<run id>` outside code reads as an HTML tag to Markdown: escape `<` and `>` there
    (not inside fenced blocks or backtick spans)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            parts = line.split("`")
            parts[::2] = [p.replace("<", "&lt;").replace(">", "&gt;") for p in parts[::2]]
            line = "`".join(parts)
        out.append(line)
    return "\n".join(out) + "\n"


# ---- command line ------------------------------------------------------------------------


def cli_markdown() -> str:
    """Every `curriculum` command with its arguments and options, as `--help` shows them."""
    import typer.cli
    import typer.main

    from cli.main import app

    command = typer.main.get_command(app)
    body = typer.cli.get_docs_for_click(
        obj=command, ctx=typer.Context(command), name="curriculum", title="Command line"
    )
    intro = (
        "Generated from the command definitions (`cli/`) each time the site is built; "
        "`curriculum COMMAND --help` prints the same.\n\n"
    )
    head, _, rest = body.partition("\n\n")
    return escape_html(f"{head}\n\n{intro}{rest}")


def cli_commands() -> list[str]:
    """Every command's full name (`curriculum index build`), groups included."""
    import typer.main

    from cli.main import app

    def walk(cmd: Any, prefix: str) -> list[str]:
        names = [prefix]
        if hasattr(cmd, "list_commands"):  # a group (typer's own click)
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                names += walk(cmd.get_command(ctx, name), f"{prefix} {name}")
        return names

    return walk(typer.main.get_command(app), "curriculum")


# ---- configuration -----------------------------------------------------------------------


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """The comment lines right above each field of `model`'s class body (and the one after
    it on the same line), joined: the doc of a field that has no description. A field with
    none of its own, right below a documented one (no blank line between), shares its doc:
    one comment over a group of fields (`# ... request limits`) documents each."""
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number (1-based) -> comment text
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    previous: tuple[int, str] | None = None  # (last line, doc) of the field above
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            previous = None
            continue
        above, n = [], node.lineno - 1
        while n >= 1 and lines[n - 1].strip().startswith("#"):
            above.insert(0, comments.get(n, ""))
            n -= 1
        after = [
            comments[n]
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if n in comments and not lines[n - 1].strip().startswith("#")
        ]
        text = " ".join(x for x in [*above, *after] if x)
        if not text and previous is not None and previous[0] == node.lineno - 1:
            text = previous[1]
        if text:
            docs[node.target.id] = text
        previous = (node.end_lineno or node.lineno, text) if text else None
    return docs


def type_name(annotation: Any) -> str:
    """A field's type as a reader of YAML needs it: `int`, `str or null`, `one of a, b`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else type_name(a) for a in args)
    if origin is list:
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {type_name(args[0])} to {type_name(args[1])}" if args else "map"
    if origin is typing.Annotated:
        return type_name(args[0])
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def bounds(info: FieldInfo) -> str:
    """`>= 1`, `> 0, <= 86400` from the field's constraints (a pattern: `pattern`)."""
    out = []
    for m in info.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(m, getattr(annotated_types, attr.capitalize())):
                out.append(f"{sign} {_number(getattr(m, attr))}")
        if pattern(info):
            out.append("a pattern, below")
    return ", ".join(dict.fromkeys(out))


def pattern(info: FieldInfo) -> str | None:
    """The regular expression a string setting must match, if any."""
    return next((p for m in info.metadata if (p := getattr(m, "pattern", None))), None)


def _number(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) and abs(v) >= 10_000 else str(v)


def _default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return ""
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" or value != value.strip() else f"`{value}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """Every key of the configuration, dotted (`llm.serve.max_n`); sections included."""
    from pipeline.core.config import PipelineConfig

    model = model or PipelineConfig
    keys = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        keys.append(key)
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            keys += config_keys(sub, f"{key}.")
    return keys


def config_markdown() -> str:
    """Every section and key of the typed configuration, with type, default, bounds and doc."""
    from pipeline.core.config import UNHASHED, PipelineConfig

    lines = [
        "# Configuration",
        "",
        "Generated from the configuration models (`pipeline/core/config.py`) each time the "
        "site is built: every key a profile (`configs/*.yaml`) or `--set section.key=value` "
        "may set, its type, default, bounds and what it does. A key outside these is refused, "
        "and so is a value outside its bounds, inf or nan (one line naming the key, exit 2). "
        "`curriculum config show` prints a profile resolved, with its config hash.",
        "",
        "Sections marked *not hashed* never change a run's records, so they are left out of "
        "the config hash that every record carries: a run resumes under other values there.",
        "",
    ]
    top = [(n, i) for n, i in PipelineConfig.model_fields.items()]
    plain = [(n, i) for n, i in top if not _is_section(i)]
    lines += _key_table(PipelineConfig, plain, "")
    for name, info in top:
        if _is_section(info):
            lines += _section(info.annotation, name, UNHASHED.get(name))
    return escape_html("\n".join(lines))


def _is_section(info: FieldInfo) -> bool:
    return isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)


def _section(model: type[BaseModel], key: str, unhashed: Any, depth: int = 2) -> list[str]:
    lines = [f"{'#' * depth} `{key}`", ""]
    if unhashed is True:
        lines += ["*Not hashed.*", ""]
    elif isinstance(unhashed, set | dict):
        lines += ["*Not hashed:* " + ", ".join(f"`{k}`" for k in sorted(unhashed)) + ".", ""]
    doc = inspect.getdoc(model)
    if doc and model.__doc__:
        lines += [" ".join(doc.split()), ""]
    fields = list(model.model_fields.items())
    lines += _key_table(model, [(n, i) for n, i in fields if not _is_section(i)], f"{key}.")
    for name, info in fields:
        if _is_section(info):
            sub = unhashed.get(name) if isinstance(unhashed, dict) else None
            lines += _section(info.annotation, f"{key}.{name}", sub, depth + 1)
    return lines


def _key_table(model: type[BaseModel], fields: list[tuple[str, FieldInfo]], prefix: str):
    if not fields:
        return []
    comments = field_comments(model)
    rows = ["| key | type | default | bounds | what it does |", "|---|---|---|---|---|"]
    for name, info in fields:
        doc = info.description or comments.get(name, "")
        rows.append(
            f"| `{prefix}{name}` | {_cell(type_name(info.annotation))} | "
            f"{_cell(_default(info))} | {_cell(bounds(info))} | {_cell(doc)} |"
        )
    # outside the table, where a regex's `|` needs no escaping
    patterns = [f"- `{prefix}{n}` must match `{pattern(i)}`" for n, i in fields if pattern(i)]
    return [*rows, "", *patterns, *([""] if patterns else [])]


# ---- catalog -----------------------------------------------------------------------------

SQL_OBJECT = re.compile(r"^CREATE\s+OR\s+REPLACE\s+(VIEW|MACRO)\s+(\w+)", re.IGNORECASE)


def sql_objects() -> list[tuple[str, str, str]]:
    """(kind, name, doc) of every view and macro of views.sql, in file order; the doc is the
    comment block right above it (a blank line ends a block)."""
    from importlib import resources

    text = resources.files("schemas").joinpath("views.sql").read_text(encoding="utf-8")
    out, block = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("--"):
            block.append(stripped.lstrip("-").strip())
            continue
        m = SQL_OBJECT.match(stripped)
        if m:
            out.append((m[1].lower(), m[2], " ".join(x for x in block if x)))
        if not stripped or m:
            block = []
    return out


def catalog_markdown() -> str:
    """The catalog's tables (their contracts: columns, types, docs) and its views and macros."""
    import pyarrow as pa

    from schemas.exports import RECORD_SCHEMA, VERL_SCHEMA
    from schemas.fields import DOCS, SCHEMA_VERSION
    from schemas.tables import TABLES

    lines = [
        "# Catalog",
        "",
        "Generated from the table contracts (`schemas/`) and the catalog's SQL "
        "(`schemas/views.sql`) each time the site is built. Every table is a view over the "
        f"committed Parquet files of the store (schema version {SCHEMA_VERSION}); the views "
        "and macros below are defined on top of them. [Auditing with SQL](../auditing.md) "
        "says which view answers which question.",
        "",
        "## Views and macros",
        "",
        "| name | kind | what it holds |",
        "|---|---|---|",
    ]
    for kind, name, doc in sql_objects():
        lines.append(f"| `{name}` | {kind} | {_cell(doc)} |")
    from pipeline.catalog.audit import list_audits

    lines += ["", "## Audits", "", "`curriculum audit NAME` runs one of these.", ""]
    lines += ["| audit | what it checks or reports |", "|---|---|"]
    lines += [f"| `{name}` | {_cell(doc)} |" for name, doc in list_audits()]
    lines += ["", "## Tables", ""]
    for name, schema in TABLES.items():
        lines += [f"### `{name}`", "", DOCS.get(name, ""), ""]
        lines += _fields_table(schema)
    lines += ["## Export rows", ""]
    for title, schema in (("records (hf, jsonl)", RECORD_SCHEMA), ("verl", VERL_SCHEMA)):
        if isinstance(schema, pa.Schema):
            lines += [f"### {title}", "", *_fields_table(schema)]
    return escape_html("\n".join(lines))


def _fields_table(schema) -> list[str]:
    rows = ["| column | type | null | what it holds |", "|---|---|---|---|"]
    for field in schema:
        doc = (field.metadata or {}).get(b"doc", b"").decode()
        null = "yes" if field.nullable else "no"
        rows.append(f"| `{field.name}` | `{_cell(str(field.type))}` | {null} | {_cell(doc)} |")
    return [*rows, ""]


# ---- benchmarks --------------------------------------------------------------------------


def benchmarks_markdown() -> str:
    """Every script of benchmarks/ with what it measures: its docstring's first paragraph."""
    from pipeline.core.config import PROJECT_ROOT

    lines = [
        "# Benchmarks",
        "",
        "Generated from the scripts in `benchmarks/` each time the site is built. Each prints "
        "the ratios it measures side by side in one run; `--help` lists its options. The "
        "figures measured with them, with their dates and machines, are on the "
        "[Performance](../performance.md) page.",
        "",
        "| script | what it measures |",
        "|---|---|",
    ]
    for path in sorted((PROJECT_ROOT / "benchmarks").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = " ".join(doc.split("\n\n")[0].split())
        lines.append(f"| `benchmarks/{path.name}` | {_cell(first)} |")
    return escape_html("\n".join(lines))


__all__ = [
    "benchmarks_markdown",
    "catalog_markdown",
    "cli_commands",
    "cli_markdown",
    "config_keys",
    "config_markdown",
    "sql_objects",
]
