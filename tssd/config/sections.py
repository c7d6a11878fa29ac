"""The settings sections: one frozen dataclass per TOML table, every field documented."""

from __future__ import annotations

from dataclasses import dataclass, field


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class DatabaseSettings:
    url: str = field(
        default="sqlite+aiosqlite:///{home}/tssd.db",
        metadata=_doc(
            "SQLAlchemy URL: sqlite+aiosqlite:///PATH (embedded) or postgresql+asyncpg://...; "
            "or memory:// (demonstrations and tests: every row lives in the daemon's memory "
            "and nothing persists; the sim backend)"
        ),
    )
    auto_init: bool = field(
        default=True,
        metadata=_doc(
            "Create the schema on a database that has no tables at all. A database with "
            "tables at another revision is always refused (run 'tssd db upgrade')."
        ),
    )
    pool_size: int = field(default=5, metadata=_doc("Connections kept open (PostgreSQL)."))
    busy_timeout_s: float = field(
        default=30.0, metadata=_doc("SQLite: how long to wait for a lock before failing.")
    )
    retention_days: float = field(
        default=30.0,
        metadata=_doc(
            "Finished requests (done, failed, cancelled) are deleted with their events this "
            "many days after they finished; 0 = keep them forever."
        ),
    )
    retention_batch: int = field(
        default=5000, metadata=_doc("Requests deleted per retention transaction.")
    )
    retention_every_s: float = field(
        default=3600.0, metadata=_doc("Seconds between two retention rounds.")
    )
    analyze_rows: int = field(
        default=10_000,
        metadata=_doc(
            "tssd runs ANALYZE of a table it changed itself (intake, retention) once it "
            "wrote or deleted this many rows of it and a tenth of the table since the last "
            "time, in the background; 0 = never (leave it to autovacuum or the operator)."
        ),
    )


@dataclass(frozen=True)
class ApiSettings:
    socket: str = field(
        default="{home}/tssd.sock", metadata=_doc("Unix socket of the API (tss-hsm, tssctl).")
    )
    socket_mode: int = field(
        default=0o660, metadata=_doc("Permissions of the Unix socket (0o660 = 432).")
    )
    socket_group: str = field(
        default="", metadata=_doc("Group owning the Unix socket; empty = the daemon's group.")
    )
    tcp: str = field(
        default="", metadata=_doc("HOST:PORT for the API over TCP; empty = off (default).")
    )
    metrics_tcp: str = field(
        default="127.0.0.1:9708",
        metadata=_doc("HOST:PORT serving only GET /metrics, /healthz and /status; empty = off."),
    )
    max_body_bytes: int = field(
        default=64 * 1024 * 1024, metadata=_doc("Largest accepted request body (bulk submit).")
    )
    max_request_body_bytes: int = field(
        default=256 * 1024,
        metadata=_doc(
            "Largest body of a call about one request (submit, tss-hsm's obtain, a queue's "
            "settings); larger ones get 413 before they are read whole. A real one is under "
            "2 kB; many requests go in one bulk submit (api.max_body_bytes)."
        ),
    )
    max_bulk: int = field(
        default=10_000,
        metadata=_doc(
            "Most requests in one bulk submit (tssctl sends 10,000 per call). A bulk's "
            "objects are garbage-collected on the event loop: one of 100,000 held it for "
            "0.5 s (docs/benchmarks.md, admission control)."
        ),
    )
    backlog: int = field(
        default=2048, metadata=_doc("Listen backlog: connections waiting to be accepted.")
    )
    max_wait_s: float = field(
        default=60.0, metadata=_doc("Longest a single long-poll wait call is held open.")
    )
    token_file: str = field(
        default="",
        metadata=_doc(
            "File holding the admin bearer token for the API over TCP ('Authorization: "
            "Bearer TOKEN'); every TCP call needs a token (limits.read_token_file for "
            "read-only). Required when api.tcp is set; the Unix socket is guarded by its "
            "permissions and the peer's uid instead (docs/reliability.md)."
        ),
    )
    pool_roots: str = field(
        default="",
        metadata=_doc(
            "Comma-separated directories that recall destinations and migrate sources must "
            'lie in, e.g. the dCache pools\' "/srv/dcache"; tssd opens files below them '
            "without following any symlink. Empty = only {home}/pools (plus every "
            "'tssd serve --pool-root DIR'); \"/\" lifts the confinement."
        ),
    )
    poll_cache_s: float = field(
        default=600.0,
        metadata=_doc(
            "tss-hsm's calls for open requests are answered from memory, each entry "
            "re-read from the database after this long: with several tssd instances on one "
            "database, a request another instance finished is seen this late at most. "
            "0 = always read the database."
        ),
    )
    status_cache_s: float = field(
        default=30.0,
        metadata=_doc(
            "The /status page is rendered at most once per this many seconds (as often as "
            "it reloads itself), in a worker thread; every reader in between gets that "
            "render, and readers during a render share it. 0 = a render per request."
        ),
    )
    status_sample_s: float = field(
        default=60.0,
        metadata=_doc(
            "How often the queue depth is sampled for the /status page's 24-hour chart "
            "(at least 1 s; at most 5000 samples are kept)."
        ),
    )


@dataclass(frozen=True)
class LimitsSettings:
    """Who may call what, and how much the API takes (docs/reliability.md, threat model)."""

    read_token_file: str = field(
        default="",
        metadata=_doc(
            "File holding the read-only bearer token for the API over TCP: GET calls only. "
            "api.token_file holds the admin token (every call). Both files must not be "
            "group- or world-writable, nor world-readable; empty = no read-only token."
        ),
    )
    header_timeout_s: float = field(
        default=10.0,
        metadata=_doc(
            "A connection must deliver a request's complete headers within this long of "
            "opening (or of the previous answer); otherwise it is closed. This also closes "
            "idle keep-alive connections."
        ),
    )
    idle_timeout_s: float = field(
        default=30.0,
        metadata=_doc("A request body that does not arrive whole within this long gets 408."),
    )
    max_connections_tcp: int = field(
        default=1000,
        metadata=_doc(
            "Open connections on the TCP API listener; more are answered 503 and closed "
            "(logged as api.connection_refused). Lowered at start if the descriptor limit "
            "cannot hold it beside the Unix socket's share and the reserve."
        ),
    )
    max_connections_unix: int = field(
        default=4000,
        metadata=_doc("Open connections on the Unix socket (pools' tss-hsm, tssctl)."),
    )
    fd_reserve: int = field(
        default=256,
        metadata=_doc(
            "Descriptors kept free of any listener: database connections, tape devices, "
            "files being copied."
        ),
    )
    max_open_requests: int = field(
        default=5_000_000,
        metadata=_doc(
            "Admission control: past this many queued or active requests, submits get 503 "
            "with Retry-After (tss-hsm exits 72, dCache calls again); 0 = no limit."
        ),
    )
    max_loop_lag_s: float = field(
        default=0.5,
        metadata=_doc(
            "Admission control: while the event loop runs this late (measured every "
            "100 ms) through tssd's own work (its CPU time in that window, not other "
            "processes'), submits get 503 with Retry-After; 0 = off."
        ),
    )
    retry_after_s: int = field(
        default=5, metadata=_doc("The Retry-After (seconds) of an admission refusal.")
    )
    catalog_import_max_bytes: int = field(
        default=1 << 30,
        metadata=_doc("Largest catalog CSV file POST /v1/catalog/import reads by path."),
    )


@dataclass(frozen=True)
class SchedulerSettings:
    tick_s: float = field(
        default=1.0, metadata=_doc("Longest pause between scheduling passes when idle.")
    )
    migrate_batch_bytes: int = field(
        default=100 * 10**9,
        metadata=_doc("Start a migration mount when a storage class has this many bytes queued."),
    )
    migrate_max_age_s: float = field(
        default=0.0,
        metadata=_doc("... or when its oldest migration has waited this long (seconds)."),
    )
    recall_chunk: int = field(
        default=1000, metadata=_doc("Requests claimed at once for a mounted tape.")
    )
    keep_mounted_s: float = field(
        default=60.0,
        metadata=_doc("Keep an idle tape mounted this long in case more requests come."),
    )
    shutdown_grace_s: float = field(
        default=30.0,
        metadata=_doc("On SIGTERM, how long work in flight may run before it is cancelled."),
    )
    shutdown_unload_s: float = field(
        default=60.0,
        metadata=_doc(
            "On SIGTERM, after the sessions ended: how long the unloads of mounted tapes "
            "may take in all (every drive at once). A tape not out by then stays in its "
            "drive, where the next start finds it (0 = leave every tape mounted)."
        ),
    )
    default_queue: str = field(default="default", metadata=_doc("Queue of requests naming none."))
    max_wait_s: float = field(
        default=86400.0,
        metadata=_doc(
            "Aging bound: a tape whose oldest recall waited this long goes before every "
            "other choice (priority, efficiency), oldest first."
        ),
    )
    age_weight: float = field(
        default=1.0,
        metadata=_doc(
            "How much waiting adds to a tape's value: at max_wait_s a request counts "
            "1 + age_weight times its bytes."
        ),
    )
    fill_wait_s: float = field(
        default=0.0,
        metadata=_doc(
            "A tape with less than fill_bytes and fill_files queued (and no priority above "
            "0) is not mounted until its oldest recall waited this long (0 = off)."
        ),
    )
    fill_bytes: int = field(
        default=20 * 10**9, metadata=_doc("Queued bytes that make a tape worth a mount at once.")
    )
    fill_files: int = field(
        default=50, metadata=_doc("Queued files that make a tape worth a mount at once.")
    )
    mount_budget_per_day: int = field(
        default=96,
        metadata=_doc(
            "Mounts of one tape in any 24 hours beyond which it waits (wear: about 20,000 "
            "rated mounts per cartridge); 0 = no limit."
        ),
    )
    priority_weight: float = field(
        default=1.0,
        metadata=_doc(
            "Priorities are strict classes: a tape holding a request of higher effective "
            "priority (request + queue priority) goes first. 0 = ignore priorities."
        ),
    )
    urgent_batch_s: float = field(
        default=1800.0,
        metadata=_doc(
            "A tape not in a drive is raised to the priority of its higher-priority recalls "
            "only once the oldest of them waited this long (until then it goes first among "
            "ordinary tapes), and a running pass turns round for them after the same wait: "
            "later requests for the same tape share the mount or the detour."
        ),
    )
    urgent_target_s: float = field(
        default=6000.0,
        metadata=_doc(
            "Latency aimed at for higher-priority recalls on tapes that need a mount: a "
            "session that came for such requests on one tape leaves that tape's ordinary "
            "work for later only when another tape's would otherwise start later than this."
        ),
    )
    urgent_within_s: float = field(
        default=300.0,
        metadata=_doc(
            "With software RAO, a mounted tape's higher-priority recalls are not read first "
            "but join its read order where they add the least locating, among the places "
            "the order reaches within this many seconds (0 = read them first)."
        ),
    )
    preempt_after_s: float = field(
        default=14400.0,
        metadata=_doc(
            "When a higher-priority recall has waited this long with every drive busy, the "
            "lowest-priority running session yields its drive after the file it is reading "
            "(negative = never preempt). A safety net: a preempted tape costs a remount, "
            "and drives that end their sessions serve urgent tapes first anyway."
        ),
    )
    write_share: float = field(
        default=0.5,
        metadata=_doc(
            "Largest fraction of the drives migrations may hold while recalls wait "
            "(recalls get the rest; either may use every drive when the other is idle)."
        ),
    )
    rao: str = field(
        default="auto",
        metadata=_doc(
            "Order of reads within a mount: 'auto' = the cheaper of position order and "
            "software RAO (nearest next file on the drive's serpentine locate model), "
            "'on' = always RAO, 'off' = position order."
        ),
    )
    resync_s: float = field(
        default=600.0,
        metadata=_doc(
            "Reload the in-memory per-tape queue index from the database at least this "
            "often (changes made by others: retries, other instances)."
        ),
    )
    submit_batch_s: float = field(
        default=0.25,
        metadata=_doc(
            "While requests keep arriving (tss-hsm, ENDIT), start a scheduling pass for new "
            "requests at most this often, so that each pass takes a batch; a drive freeing "
            "up is never held back by this."
        ),
    )


@dataclass(frozen=True)
class EnditDirectory:
    """One ENDIT base directory served for one pool (``[[endit.directories]]``)."""

    path: str = field(
        default="",
        metadata=_doc("Base directory holding in/, out/, request/ and trash/ (the -directory=)."),
    )
    hsm_name: str = field(
        default="osm",
        metadata=_doc("HSM instance name of the pool's 'hsm create osm <name> endit...' line."),
    )
    queue: str = field(
        default="", metadata=_doc("Queue of this directory's requests; empty = the default.")
    )
    priority: int = field(default=0, metadata=_doc("Priority of this directory's requests."))
    storage_class: str = field(
        default="endit:default",
        metadata=_doc("Storage class of a flush whose request file names none (old plugins)."),
    )


@dataclass(frozen=True)
class EnditSettings:
    directories: tuple[EnditDirectory, ...] = field(
        default=(),
        metadata=_doc(
            "ENDIT directories served for dCache's endit provider: [[endit.directories]] "
            "tables (path, hsm_name, queue, priority, storage_class); in "
            "TSSD_ENDIT_DIRECTORIES a TOML inline array. Empty = endit intake off."
        ),
    )
    inotify: bool = field(
        default=True,
        metadata=_doc("Watch the directories with inotify; off = rescans only (e.g. on NFS)."),
    )
    rescan_s: float = field(
        default=30.0,
        metadata=_doc("Full rescan of each directory and its open requests (safety net)."),
    )
    cancel_grace_s: float = field(
        default=120.0,
        metadata=_doc(
            "A recall whose request file is gone is cancelled after this long, so a pool "
            "restart (request/ wiped, then re-issued) attaches to the running recall."
        ),
    )
    orphan_grace_s: float = field(
        default=10.0,
        metadata=_doc(
            "A file in in/ whose request file has been gone this long (a cancelled stage, "
            "or a recall that finished after the cancel) is removed. The plugin deletes the "
            "request file 1 s before it moves in/<id> into the pool: keep this well above."
        ),
    )
    check_parent_pid: bool = field(
        default=True,
        metadata=_doc(
            "Drop a stage request whose parent_pid (the pool process that wrote it) no "
            "longer runs on this host, and delete its request file, as ENDIT's retriever "
            "does. Off when tssd runs in another PID namespace than the pool."
        ),
    )
    min_free_percent: float = field(
        default=5.0,
        metadata=_doc("Admit stages only while in/ keeps this much of its file system free."),
    )
    min_free_bytes: int = field(
        default=0, metadata=_doc("... and at least this many bytes free (the larger wins).")
    )
    flush_retry_s: float = field(
        default=600.0,
        metadata=_doc("Resubmit a failed flush (transient error) after this long."),
    )
    batch: int = field(
        default=1000, metadata=_doc("Most request files recorded in one transaction.")
    )


@dataclass(frozen=True)
class ClusterSettings:
    """Several tssd instances (tape servers) sharing one PostgreSQL database."""

    enabled: bool = field(
        default=True,
        metadata=_doc(
            "Register this instance, renew its heartbeat and reap dead instances' leases. "
            "Takes effect on PostgreSQL only; with SQLite tssd is always a single instance."
        ),
    )
    instance: str = field(
        default="",
        metadata=_doc("Id of this instance, unique among those sharing a database; '' = hostname."),
    )
    heartbeat_s: float = field(
        default=5.0, metadata=_doc("How often the instance renews its heartbeat (seconds).")
    )
    lease_s: float = field(
        default=90.0,
        metadata=_doc(
            "An instance whose heartbeat is older than this is dead: its active requests "
            "return to the queue and its drives' tapes are released. An instance that could "
            "not renew for 2/3 of it exits (status 75). At least 3 heartbeats; longer than "
            "a database failover (docs/scaling.md)."
        ),
    )


@dataclass(frozen=True)
class HealthSettings:
    """Faulty drives and tapes (tssd/health.py)."""

    drive_max_failures: int = field(
        default=5,
        metadata=_doc(
            "Take a drive out of service (drives.enabled = false) after this many failed "
            "operations in a row; 0 = never."
        ),
    )
    tape_suspect_drives: int = field(
        default=3,
        metadata=_doc(
            "Mark a tape suspect (tapes.state = 'suspect') when it failed on this many "
            "different drives without a success in between; 0 = never."
        ),
    )


@dataclass(frozen=True)
class BackpressureSettings:
    """Recalls wait while their destination file system is nearly full (tssd/backpressure.py)."""

    min_free_bytes: int = field(
        default=0,
        metadata=_doc("Hold recalls to a file system with fewer free bytes than this."),
    )
    min_free_percent: float = field(
        default=2.0,
        metadata=_doc("... or with less than this percentage of it free; 0 = no check."),
    )
    recheck_s: float = field(
        default=10.0, metadata=_doc("How often a full file system is looked at again.")
    )


@dataclass(frozen=True)
class LogSettings:
    level: str = field(default="info", metadata=_doc("debug, info, warning or error."))
    format: str = field(
        default="auto", metadata=_doc("json, console, or auto (console on a terminal).")
    )


@dataclass(frozen=True)
class DeliverySettings:
    """How recalled files reach the pool disk (docs/dcache.md, "Delivery")."""

    claim_timeout_s: float = field(
        default=3600.0,
        metadata=_doc(
            "A recall for tss-hsm is written to a part file beside its destination; the "
            "pool's next call renames it into place. A part file no call claims within "
            "this long is removed and its request ends 'abandoned' (dCache gave up). Must "
            "exceed the pool's poll interval (p:delay) with room to spare."
        ),
    )
    op_timeout_s: float = field(
        default=300.0,
        metadata=_doc(
            "Longest one file operation on pool disk may take (open, a chunk's read or "
            "write, fsync) before its request fails and the drive is freed."
        ),
    )
