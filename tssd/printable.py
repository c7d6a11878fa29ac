"""Text from outside made safe to show on a terminal: the one place control characters
are escaped.

A path, an error message or a name that tssd stores came from a pool, an operator or a
tape backend; shown raw, an ESC or OSC sequence in it could retitle the operator's
terminal, clear the screen or forge lines (CR), and a C1 byte is read as ESC by some
terminals. Every human-facing renderer (tssctl's tables, views, ``top`` and error lines,
``tss-hsm``'s stderr line) passes such text through :func:`printable`, which shows each
control character as a visible escape (``\\x1b``, ``\\u009b``, ``\\u202e``) instead.

Standard library only: ``tss-hsm`` imports this module.
"""

from __future__ import annotations

# C0 controls and DEL, the C1 controls, and the Unicode direction overrides and isolates
# (which reorder what the terminal shows: "Trojan source").
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
             *range(0x2066, 0x206A)]  # fmt: skip
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x80 else f"\\u{c:04x}") for c in _CONTROLS}


def printable(text: str) -> str:
    """*text* with every control character written as an escape."""
    return text.translate(_ESCAPES)


def printable_line(text: str) -> str:
    """*text* as one line: runs of blanks (tabs, newlines) become one space, and the
    remaining control characters are escaped."""
    return printable(" ".join(text.split()))
