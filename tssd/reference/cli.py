"""docs/reference/commands.md: every command of tssd, tssctl and tss-hsm, from their parsers."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator

from tssd.cli import daemon
from tssd.cli.commands import build_parser
from tssd.reference.table import table
from tssd.shim.main import HELP as HSM_HELP


def _leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield words, parser, parser.description or ""
        return
    helps = {a.dest: a.help or "" for a in subs[0]._choices_actions}
    for name, child in subs[0].choices.items():
        if not child.description and helps.get(name):
            child.description = helps[name]
        yield from _leaves(child, (*words, name))


def _option(action: argparse.Action) -> tuple[str, str]:
    if action.option_strings:
        metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
        spelled = ", ".join(f"`{o}{metavar}`" for o in action.option_strings)
    else:
        spelled = f"`{action.metavar or action.dest}`"
    return spelled, action.help or ""


def _shown(parser: argparse.ArgumentParser, common: frozenset[str]) -> list[tuple[str, str]]:
    return [
        _option(a)
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and not common.intersection(a.option_strings)
    ]


def _command(
    words: tuple[str, ...], parser: argparse.ArgumentParser, text: str, common: frozenset[str]
) -> str:
    rows = _shown(parser, common)
    body = f"\n### `{' '.join(words)}`\n\n{' '.join(text.split())}\n"
    return body + ("\n" + table(("argument", "meaning"), rows) if rows else "")


def _program(title: str, parser: argparse.ArgumentParser, prog: str) -> str:
    intro = " ".join((parser.description or "").split())
    options = _shown(parser, frozenset())
    common = frozenset(o for a in parser._actions for o in a.option_strings)
    shared = "\nOptions of every command:\n\n" + table(("argument", "meaning"), options)
    return (
        f"\n## {title}\n\n{intro}\n"
        + (shared if options else "")
        + "".join(
            # Alphabetical: the parser's own order is the order its modules were imported in.
            _command(words, leaf, text, common)
            for words, leaf, text in sorted(_leaves(parser, (prog,)), key=lambda leaf: leaf[0])
        )
    )


def _tssctl_parser() -> argparse.ArgumentParser:
    # Importing tssd.cli.tssctl registers every command module, in the order of --help.
    importlib.import_module("tssd.cli.tssctl")
    return build_parser()


def render() -> str:
    return (
        "# Commands\n\n"
        "Every command of the daemon `tssd`, the operator tool `tssctl` and the HSM script "
        "`tss-hsm`, as their `--help` describes them.\n"
        + _program("tssd", daemon.build_parser(), "tssd")
        + _program("tssctl", _tssctl_parser(), "tssctl")
        + f"\n## tss-hsm\n\n```text\n{HSM_HELP.rstrip()}\n```\n"
    )
