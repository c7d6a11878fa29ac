"""``tssctl drives``, ``tapes`` and ``queues`` with no action list, as ``list`` does
(issue 21 point 3); groups without a default still ask for an action."""

from __future__ import annotations

import pytest

from tssd.cli.commands import build_parser
from tssd.cli.commands.drives import drives_list
from tssd.cli.commands.queues import queues_list, queues_set
from tssd.cli.commands.tapes import tapes_list, tapes_show


@pytest.mark.parametrize(
    "argv,run",
    [(["drives"], drives_list), (["queues"], queues_list), (["tapes"], tapes_list),
     (["--json", "drives"], drives_list), (["queues", "set", "q", "--pause"], queues_set),
     (["tapes", "show", "SIM000L9"], tapes_show)],
)  # fmt: skip
def test_group_alone_runs_its_default(argv: list[str], run: object) -> None:
    assert build_parser().parse_args(argv).run is run


def test_the_default_takes_its_options() -> None:
    args = build_parser().parse_args(["tapes", "--sort", "pending", "--limit", "5", "--json"])
    assert (args.run, args.sort, args.limit, args.json) == (tapes_list, "pending", 5, True)
    listed = build_parser().parse_args(["tapes", "list", "--sort", "mounts"])
    assert (listed.run, listed.sort) == (tapes_list, "mounts")


def test_groups_without_a_default_still_need_an_action() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["requests"])
    assert exc.value.code == 2
