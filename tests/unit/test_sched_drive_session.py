"""One drive's session state (``scheduler/drive_session.py``): what a session reserves
and releases, its tier and yield, its tour, and the registry's views across drives."""

from __future__ import annotations

from tests.unit.test_sched_tiers import SetClock
from tssd.domain import Kind
from tssd.scheduler.drive_session import DriveSessions, Running
from tssd.scheduler.drives import DriveState


def registry() -> DriveSessions:
    return DriveSessions({"d1": DriveState("d1", volume="M"), "d2": DriveState("d2")}, SetClock(0))


def test_one_session_object_per_drive_which_finds_its_drive() -> None:
    sessions = registry()
    assert sessions.of("d1") is sessions.of("d1")
    assert sessions.of("d1").drive is sessions.drives["d1"]
    assert sessions.of("d9").drive is None  # not (yet) known to the drive manager
    assert [s.name for s in sessions] == ["d1", "d9"]


def test_a_recall_reserves_its_tape_and_the_one_in_the_drive_and_releases_both() -> None:
    sessions = registry()
    session = sessions.of("d1")
    session.reserve(Kind.RECALL, "V", "M")
    assert set(sessions.reservations.volumes) == {"V", "M"}
    assert sessions.reservations.drain_touched() == {"V", "M"}
    session.release()
    assert not sessions.reservations.volumes and not session.volumes
    assert sessions.reservations.drain_touched() == {"V", "M"}


def test_a_migration_reserves_its_storage_class_until_it_ends() -> None:
    sessions = registry()
    session = sessions.of("d2")
    session.reserve(Kind.MIGRATE, "sc", None)
    assert sessions.reservations.class_busy("sc") and not sessions.reservations.volumes
    session.reserve_volume("W")  # the tape it fills
    session.release()
    assert not sessions.reservations.class_busy("sc") and not sessions.reservations.volumes


def test_a_tape_released_early_and_taken_by_another_drive_stays_reserved() -> None:
    """The tape a session unloads is free from then on: another drive's session may take
    it, and the first session's end must not drop that reservation."""
    sessions = registry()
    first, second = sessions.of("d1"), sessions.of("d2")
    first.reserve(Kind.RECALL, "V", "M")
    first.release_volume("M")  # unloaded to make room for V
    second.reserve(Kind.RECALL, "M", None)
    first.release_volume("M")  # again: not its own any more
    first.release()
    assert sessions.reservations.volume_busy("M") and not sessions.reservations.volume_busy("V")


def test_a_recall_starts_at_its_priority_and_a_stop_makes_it_yield_until_it_ends() -> None:
    session = registry().of("d1")
    session.begin_recall(0, None)
    assert session.floor is None and session.stop_at == float("inf")
    session.begin_recall(5, 300.0)
    assert session.floor == 5 and session.stop_at == 300.0
    session.held = {1: (7, 0.0), 2: (3, 0.0)}
    assert session.held_top() == 7
    session.yield_requested = True
    session.ended()
    assert not session.yield_requested and session.stop_at == float("inf")


def test_tours_are_listed_in_the_order_they_began_and_a_cap_is_returned_once() -> None:
    sessions = registry()
    sessions.of("d2").begin_tour(Running("B", "bulk", 0, 100.0))
    sessions.of("d1").begin_tour(Running("A", "bulk", 0, 200.0))
    assert list(sessions.tours()) == ["d2", "d1"]
    sessions.of("d2").capped = ("B", 50.0)
    assert sessions.of("d2").end_tour() == ("B", 50.0)
    assert sessions.of("d2").end_tour() is None
    assert list(sessions.tours()) == ["d1"] and sessions.of("d2").run is None


def test_the_yielding_drives_are_those_asked_to() -> None:
    sessions = registry()
    sessions.of("d1").yield_requested = True
    sessions.of("d2")
    assert sessions.yielding() == {"d1"}
