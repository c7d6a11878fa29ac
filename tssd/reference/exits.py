"""docs/reference/exit-codes.md: every exit code of tss-hsm, from its declaration."""

from __future__ import annotations

from tssd.reference.table import table
from tssd.shim.exit_codes import EXIT_CODES


def render() -> str:
    rows = [(f"`{e.code}`", e.when, e.why) for e in EXIT_CODES]
    return (
        "# tss-hsm exit codes\n\n"
        "What the HSM script exits with, when, and why that code: dCache acts on the code "
        '(docs/dcache.md, "Exit codes", has what dCache does with each, from its source). '
        "Every diagnostic is one line on stderr; stdout carries only the URI of `put`.\n\n"
        + table(("code", "when", "why that code"), rows)
    )
