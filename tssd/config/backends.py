"""The backend settings sections: ``[backend]``, ``[sim]`` and ``[scsi]``.

Kept apart from :mod:`tssd.config.sections` because they grow with each backend; every
field is documented as there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tssd.config.sections import _doc


@dataclass(frozen=True)
class BackendSettings:
    type: str = field(
        default="sim",
        metadata=_doc("Tape backend: 'sim' (simulated IBM SP) or 'scsi' (mtx + st library)."),
    )
    retries: int = field(
        default=5, metadata=_doc("Attempts of a backend operation on transient errors.")
    )
    retry_base_s: float = field(
        default=1.0, metadata=_doc("First retry delay; doubles each attempt.")
    )
    retry_max_s: float = field(default=60.0, metadata=_doc("Longest retry delay."))
    max_same_failures: int = field(
        default=3,
        metadata=_doc(
            "A request whose tape session fails this many times in a row with the same "
            "error (not a transient one) ends failed with that error instead of going round "
            "again; counted per daemon process."
        ),
    )


@dataclass(frozen=True)
class SimSettings:
    data_dir: str = field(
        default="{home}/sim", metadata=_doc("Where the simulated library keeps object bytes.")
    )
    drives: int = field(default=4, metadata=_doc("Number of simulated drives."))
    drive_prefix: str = field(
        default="drive",
        metadata=_doc(
            "Simulated drives are named PREFIX0, PREFIX1, ...: give every tssd instance "
            "sharing one database its own prefix (drive names are unique across instances)."
        ),
    )
    tapes: int = field(
        default=40, metadata=_doc("Number of cartridges the library holds (created empty).")
    )
    profile: str = field(default="lto9", metadata=_doc("Drive and media timing profile."))
    time_scale: float = field(
        default=0.02,
        metadata=_doc(
            "Multiplier on simulated hardware delays in 'tssd serve' (1.0 = real time, "
            "0 = instantaneous). 'tssd simulate' uses a virtual clock instead."
        ),
    )
    tape_capacity: int = field(
        default=0, metadata=_doc("Cartridge capacity in bytes; 0 = the profile's.")
    )
    robot_arms: int = field(
        default=2,
        metadata=_doc("Robot arms moving cartridges; mounts beyond this many wait for one."),
    )
    transient_error_rate: float = field(
        default=0.0,
        metadata=_doc(
            "Fraction of mounts, reads and writes failing with a transient IBM SP return "
            "code (12, 14, 232, ...); 0 = none."
        ),
    )
    permanent_error_rate: float = field(
        default=0.0,
        metadata=_doc(
            "Fraction of reads and writes failing with a permanent IBM SP return code "
            "(2, 124, 2063); 0 = none."
        ),
    )
    seed: int = field(default=0, metadata=_doc("Seed of the simulated library's error injection."))
    layout_spread: float = field(
        default=0.03,
        metadata=_doc(
            "True layout of the simulated tapes: physical bytes per object byte vary per "
            "tape uniformly within 1 +- this (compression, rewritten data sets); the "
            "scheduler does not know it. 0 = exactly the catalog sizes."
        ),
    )
    file_spread: float = field(
        default=0.02,
        metadata=_doc(
            "True layout: standard deviation of each object's own factor on its physical "
            "size (headers, file mark, compressibility). 0 = none."
        ),
    )
    drive_geometry: bool = field(
        default=False,
        metadata=_doc(
            "The simulated drives answer READ END OF WRAP POSITION as IBM LTO-7 and later "
            "do: once a tape is mounted the scheduler plans on the wrap ends of its true "
            "layout, as the SCSI backend's would. Off: what an IBM SP site knows (its "
            "client does not talk to drives), the media type's nominal geometry."
        ),
    )


@dataclass(frozen=True)
class ScsiSettings:
    changer: str = field(
        default="/dev/sg0",
        metadata=_doc(
            "Changer device given to 'mtx -f': the library's generic SCSI device "
            "(/dev/sgN or a stable /dev/tape/by-id path), or an emulated library directory."
        ),
    )
    mtx: str = field(
        default="mtx",
        metadata=_doc(
            "The mtx command, split like a shell line: the mtx binary, or "
            "'python3 -m tssd.backends.scsi.mtxemu' for an emulated library."
        ),
    )
    drives: str = field(
        default="",
        metadata=_doc(
            "Drives tssd may use, comma-separated SERIAL@ELEMENT[=DEVICE]: the drive's serial "
            "number, its Data Transfer Element number in 'mtx status', and its no-rewind st "
            "device (found by serial in sysfs when omitted; a given one is checked). Drives "
            "are named by serial, never by /dev numbering. 'auto': every drive the changer "
            "names (READ ELEMENT STATUS, DVCID) mapped to its st device by serial."
        ),
    )
    device_layer: str = field(
        default="st",
        metadata=_doc("'st' (Linux st driver ioctls) or 'file' (emulated file-backed drives)."),
    )
    block_size: int = field(
        default=256 * 1024, metadata=_doc("Tape block size in bytes for newly labelled tapes.")
    )
    tape_capacity: int = field(
        default=18 * 10**12,
        metadata=_doc(
            "Nominal bytes per cartridge, used to choose a tape; the drive's end of medium "
            "is what closes a tape (LTO-9: 18e12)."
        ),
    )
    volumes: str = field(
        default=r"^(?!CLN).+",
        metadata=_doc(
            "Regular expression of the barcodes tssd may use; others (cleaning cartridges, "
            "other applications' tapes) are left alone."
        ),
    )
    move_timeout_s: float = field(
        default=900.0,
        metadata=_doc("Longest an mtx load/unload may take before it is killed (hung robot)."),
    )
    status_timeout_s: float = field(
        default=300.0, metadata=_doc("Longest an mtx status or inquiry may take.")
    )
    emulation_dir: str = field(
        default="",
        metadata=_doc(
            "If set, create (when absent) an emulated library in this directory and use it "
            "instead of changer, mtx, drives and device_layer (tests and demos)."
        ),
    )
    emulation_drives: int = field(default=2, metadata=_doc("Drives of a new emulated library."))
    emulation_tapes: int = field(
        default=8, metadata=_doc("Cartridges of a new emulated library (10 slots more).")
    )
    emulation_capacity: int = field(
        default=1024**3, metadata=_doc("Bytes per cartridge of a new emulated library.")
    )
    media: str = field(
        default="",
        metadata=_doc(
            "Media type of the cartridges, for software RAO on its nominal geometry: lto7, "
            "lto8, lto9, 3592 or t10k. Empty: each tape's barcode suffix (L7, L8, M8, L9, "
            "JE) tells, and tapes without one are read in position order."
        ),
    )
