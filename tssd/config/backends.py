"""The backend settings sections: ``[backend]``, ``[sim]``, ``[scsi]`` and ``[sp]``.

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
        metadata=_doc(
            "Tape backend: 'sp' (IBM Spectrum Protect through its client API), 'scsi' "
            "(mtx + st library) or 'sim' (a simulated SP library, for demos and tests)."
        ),
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


@dataclass(frozen=True)
class SpSettings:
    api_library: str = field(
        default="/opt/tivoli/tsm/client/api/bin64/libApiTSM64.so",
        metadata=_doc(
            "The IBM Spectrum Protect client API library (libApiTSM64.so): the vendor's, "
            "or the stand-in built from tssd/backends/sp/standin for tests and demos."
        ),
    )
    options_file: str = field(
        default="",
        metadata=_doc(
            "The client options file (dsm.opt) naming the server stanza of dsm.sys, set as "
            "DSMI_CONFIG for the library; empty: the DSMI_CONFIG of tssd's environment."
        ),
    )
    dsmi_dir: str = field(
        default="",
        metadata=_doc(
            "Set as DSMI_DIR: the directory of the API's dsm.sys and message files; empty: "
            "tssd's environment, else the library's own default."
        ),
    )
    dsmi_log: str = field(
        default="",
        metadata=_doc("Set as DSMI_LOG: where the API writes dsierror.log; empty: unchanged."),
    )
    node: str = field(
        default="",
        metadata=_doc("SP node name tssd signs on as; empty: the NODENAME of the options file."),
    )
    owner: str = field(
        default="", metadata=_doc("Owner name of the archive objects; empty: the node's.")
    )
    password_file: str = field(
        default="",
        metadata=_doc(
            "File holding the node's password (first line; mode 0600, owned by tssd's "
            "user); empty: PASSWORDACCESS GENERATE in dsm.sys (the password the client "
            "stores)."
        ),
    )
    filespace: str = field(
        default="/tssd",
        metadata=_doc("Filespace tssd archives into (registered at start when absent)."),
    )
    management_classes: str = field(
        default="",
        metadata=_doc(
            "Management class per storage class, comma-separated STORAGECLASS=CLASS "
            "(the class's archive copy group names the tape pool); others use "
            "default_management_class."
        ),
    )
    default_management_class: str = field(
        default="",
        metadata=_doc(
            "Management class of the storage classes not in management_classes; empty: "
            "the node's policy domain default."
        ),
    )
    max_mount_points: int = field(
        default=4,
        metadata=_doc(
            "Concurrent tape sessions tssd opens: the node's MAXNUMMP on the server "
            "(each session holds one mount point)."
        ),
    )
    volume_capacity: int = field(
        default=18 * 10**12,
        metadata=_doc(
            "Nominal bytes per cartridge of the tape pools (LTO-9: 18e12): a migration "
            "larger than this fails at once."
        ),
    )
    admin_command: str = field(
        default="",
        metadata=_doc(
            "Admin client command, split like a shell line (e.g. 'dsmadmc -id=tssd "
            "-password=... -dataonly=yes -comma'): tssd appends a SELECT on CONTENTS to "
            "learn volume names. Empty: volumes are named by their restore-order key."
        ),
    )
    admin_timeout_s: float = field(
        default=120.0, metadata=_doc("Longest the admin command may run before it is killed.")
    )
    buffer_size: int = field(
        default=1024 * 1024,
        metadata=_doc("Bytes per dsmGetData / dsmSendData buffer."),
    )
    mount_wait: bool = field(
        default=True,
        metadata=_doc(
            "dsmBeginGetData's mountWait: wait for a tape mount instead of failing with "
            "'mount not possible'."
        ),
    )
