"""Profiles and `--set` values are untrusted input: a YAML loader with alias
expansion, nesting and size bounded, and a reader that takes only a regular UTF-8 text file.
Every refusal is one ConfigError line naming the file (the CLI prints it, exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A profile or override that does not describe a valid configuration."""


# A profile is a small hand-written file: these bounds are far above any real one (the
# production profile has ~150 nodes, 5 KB) and far below what hurts. YAML aliases share one
# node many times; a few hundred bytes of nested aliases ("billion laughs") stand for 10^9
# nodes once expanded by anything that walks the document (validation, error messages).
MAX_PROFILE_BYTES = 1 << 20
MAX_YAML_NODES = 100_000
MAX_YAML_DEPTH = 64


def _expanded_nodes(root: yaml.Node, where: str) -> None:
    """Refuse a document whose nodes, aliases expanded, exceed MAX_YAML_NODES or nest deeper
    than MAX_YAML_DEPTH. Sizes are memoised per node, so the check itself is linear in the
    file, however many times an alias is used."""
    sizes: dict[int, int] = {}
    # Iterative post-order walk: (node, depth, children pushed yet?).
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, expanded = stack.pop()
        if id(node) in sizes:
            continue
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"{where}: YAML nested deeper than {MAX_YAML_DEPTH} levels")
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            sizes[id(node)] = 1
            continue
        if not expanded:
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        if total > MAX_YAML_NODES:
            raise ConfigError(
                f"{where}: YAML expands to more than {MAX_YAML_NODES:,} nodes (aliases "
                "repeated inside aliases?); a profile is a small mapping of settings"
            )
        sizes[id(node)] = total


def safe_load_bounded(text: str, where: str) -> Any:
    """yaml.safe_load with alias expansion and nesting bounded (see MAX_YAML_NODES): any
    malformed or oversized document is one ConfigError line naming `where`."""
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _expanded_nodes(node, where)
            return loader.construct_document(node)
        except yaml.YAMLError as exc:
            detail = " ".join(str(exc).split())
            raise ConfigError(f"{where}: not valid YAML: {detail[:300]}") from None
        except RecursionError:
            raise ConfigError(f"{where}: YAML nested deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()


def read_profile_text(path: Path) -> str:
    """A profile's text: a regular file of UTF-8 text under MAX_PROFILE_BYTES, else one
    ConfigError line naming it (a directory, a device, a binary file, ...)."""
    try:
        if path.is_dir():
            raise ConfigError(f"config profile {path} is a directory, not a YAML file")
        if not path.is_file():
            raise ConfigError(f"config profile {path} is not a regular file")
        with path.open("rb") as fh:
            raw = fh.read(MAX_PROFILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config profile {path}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise ConfigError(
            f"config profile {path} is larger than {MAX_PROFILE_BYTES >> 20} MiB; "
            "a profile is a small YAML file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config profile {path} is not UTF-8 text (byte {exc.start + 1}); "
            "a profile is a YAML file"
        ) from None
    if "\x00" in text:
        raise ConfigError(f"config profile {path} is not text (it holds NUL bytes)")
    return text


def _parse_scalar(text: str) -> Any:
    # YAML scalar rules: "3" -> 3, "true" -> True, "[a, b]" -> list, "x" -> "x".
    return safe_load_bounded(text, f"override value {text[:40]!r}") if text != "" else ""


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` overrides (CLI `--set`) to a raw profile dict."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form section.key=value")
        dotted, raw = item.split("=", 1)
        keys = [k for k in dotted.strip().split(".") if k]
        if not keys:
            raise ConfigError(f"override {item!r} names no key")
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {k!r} is not a section")
        node[keys[-1]] = _parse_scalar(raw)
    return data


__all__ = ["ConfigError", "apply_overrides", "read_profile_text", "safe_load_bounded"]
