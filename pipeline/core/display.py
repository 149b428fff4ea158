"""The one way stored values are shown to a person (`curriculum sql`, `audit`, `index search`,
`export`, ...): plain text that a terminal cannot take for anything else.

Stored values are untrusted text: a passage, a model's output or a question may hold Rich
markup (`[bold]`, `[link=file:///etc/passwd]`), ANSI escape sequences, carriage returns that
overwrite what was printed, bidirectional overrides that reorder it, or lone surrogates that
cannot be encoded at all. `display_text` escapes every such character the way Python writes
it in a string literal (`\\x1b`, `\\n`, `\\u202e`) and doubles the backslash, so what is
printed is exactly what is stored: the mapping is one-to-one and `undisplay` reverses it.
Callers then print it with markup off (Rich `Text`, or plain `typer.echo`).
"""

from __future__ import annotations

import unicodedata
from typing import Any

# Unicode categories escaped: controls (C0, DEL, C1 such as CSI \x9b), surrogates, line and
# paragraph separators (terminals and editors break lines there).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
# Format characters that reorder or hide text (Trojan Source, CVE-2021-42574).
_BIDI_AND_INVISIBLE = frozenset(
    "\u061c\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escaped(ch: str) -> bool:
    return ch in _BIDI_AND_INVISIBLE or unicodedata.category(ch) in _ESCAPED_CATEGORIES


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_text(text: str, backslash: bool = True) -> str:
    """`text` with control, separator, surrogate and bidi characters escaped; with
    `backslash` (the default) a backslash is doubled, which makes the escaping reversible."""
    if text.isascii() and text.isprintable() and (not backslash or "\\" not in text):
        return text  # the common case, untouched
    return "".join(
        _escape(ch) if (ch == "\\" and backslash) or (ch != "\\" and _escaped(ch)) else ch
        for ch in text
    )


def display_text(value: Any, null: str = "NULL") -> str:
    """One stored value as one line of plain text: None as `null`, a string escaped (see the
    module's doc), anything else as `str()` with its control characters escaped (a nested
    value's strings are already escaped by their repr)."""
    if value is None:
        return null
    if isinstance(value, str):
        return escape_text(value)
    return escape_text(str(value), backslash=False)


def undisplay(text: str) -> str:
    """The inverse of `display_text` for strings (tests and tools that read the output)."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}[nxt]
        out.append(chr(int(text[i + 2 : i + 2 + width], 16)))
        i += 2 + width
    return "".join(out)


__all__ = ["display_text", "escape_text", "undisplay"]
