"""What the machine has, for settings that must stay within it: its physical memory, and
sizes as DuckDB writes them ("2GB" = 2·10^9 bytes, "512MiB", or "25%" of the memory)."""

from __future__ import annotations

import os
import re

_UNITS = {
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def size_bytes(text: str) -> int:
    """A DuckDB size ("2GB" = 2·10^9, "512MiB") or share of the machine's memory ("25%")."""
    t = text.strip().lower().replace(" ", "")
    if t.endswith("%"):
        return int(physical_memory() * float(t[:-1]) / 100)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([a-z]+)", t)
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


__all__ = ["physical_memory", "size_bytes"]
