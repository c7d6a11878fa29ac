"""Parsing of the argument lists dCache builds for ``tss-hsm`` (pure: no I/O).

dCache calls (dCache's ScriptNearlineStorage; docs/dcache.md)::

    put <pnfsid> <path> -si=<storage info> [-key=value ...]
    get <pnfsid> <path> -si=<storage info> -uri=<uri> [-uri=<uri> ...] [-key=value ...]
    remove -uri=<uri> [-key=value ...]

Written without ``re``, ``urllib.parse`` or ``dataclasses``: importing those would cost more
than the whole parse (see the package docstring).
"""

from __future__ import annotations

from tssd.shim.names import NAME, PNFSID, is_hex, is_int

TYPE_CHECKING = False  # typing costs milliseconds to import; mypy treats this name specially
if TYPE_CHECKING:
    from collections.abc import Sequence

EXIT_OK = 0
EXIT_OTHER = 1
EXIT_PERMANENT = 31
EXIT_INVALID = 32
EXIT_NO_SPACE = 41
EXIT_READ = 42
EXIT_WRITE = 43
EXIT_PENDING = 72
EXIT_TERMINATED = 143

VERBS = ("put", "get", "remove")
MODES = ("block", "poll")
DEFAULT_RECONNECT_S = 3600.0

_INFINITY = float("inf")


class HsmExit(Exception):
    """Ends the call with ``code``; ``message`` is its one diagnostic line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class UsageError(HsmExit):
    """The arguments or the storage info are invalid (exit 32)."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_INVALID, message)


class StorageInfo:
    """The parts of dCache's storage info string that tssd needs."""

    __slots__ = ("adler32", "group", "hsm", "locations", "size", "storage_class", "store")

    def __init__(
        self,
        size: int,
        storage_class: str | None = None,
        hsm: str | None = None,
        store: str | None = None,
        group: str | None = None,
        adler32: str | None = None,
        locations: tuple[str, ...] = (),
    ) -> None:
        self.size = size
        self.storage_class = storage_class
        self.hsm = hsm
        self.store = store
        self.group = group
        self.adler32 = adler32
        self.locations = locations


class Location:
    """One ``-uri=``: a tape copy as ``put`` once printed it."""

    __slots__ = ("bfid", "instance", "uri")

    def __init__(self, uri: str, bfid: str, instance: str) -> None:
        self.uri = uri
        self.bfid = bfid
        self.instance = instance


class Transfer:
    """The file a put or get moves."""

    __slots__ = ("path", "pnfsid", "si")

    def __init__(self, pnfsid: str, path: str, si: StorageInfo) -> None:
        self.pnfsid = pnfsid
        self.path = path
        self.si = si


class Options:
    """The ``-key=value`` options tss-hsm understands; dCache's own ones are ignored."""

    __slots__ = (
        "hsm_instance",
        "hsm_type",
        "mode",
        "priority",
        "queue",
        "reconnect_timeout",
        "tssd",
    )

    def __init__(
        self,
        tssd: str | None = None,
        mode: str = "block",
        queue: str | None = None,
        priority: int | None = None,
        hsm_type: str | None = None,
        hsm_instance: str | None = None,
        reconnect_timeout: float = DEFAULT_RECONNECT_S,
    ) -> None:
        self.tssd = tssd
        self.mode = mode
        self.queue = queue
        self.priority = priority
        self.hsm_type = hsm_type
        self.hsm_instance = hsm_instance
        self.reconnect_timeout = reconnect_timeout


class Call:
    """A parsed invocation; ``transfer`` is set for put and get."""

    __slots__ = ("options", "transfer", "uris", "verb")

    def __init__(
        self,
        verb: str,
        options: Options,
        uris: tuple[Location, ...] = (),
        transfer: Transfer | None = None,
    ) -> None:
        self.verb = verb
        self.options = options
        self.uris = uris
        self.transfer = transfer


def parse_args(argv: Sequence[str]) -> Call:
    """Parse one dCache call. Raises :class:`UsageError` and nothing else."""
    positionals, options = split_argv(argv)
    if not positionals:
        raise UsageError("missing command: expected put, get or remove")
    verb, rest = positionals[0], positionals[1:]
    if verb not in VERBS:
        raise UsageError(f"unknown command {verb!r}: expected put, get or remove")
    uris = tuple(parse_location(uri) for uri in options.get("uri", []))
    parsed = parse_options(options)
    if verb != "remove":
        return Call(verb, parsed, uris, transfer=parse_transfer(verb, rest, options))
    if rest:
        raise UsageError(f"unexpected argument {rest[0][:80]!r}")
    if not uris:
        raise UsageError("remove needs at least one -uri=")
    return Call(verb, parsed, uris)


def split_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Split into positionals and ``-key[=value]`` options (every value kept, in order)."""
    positionals: list[str] = []
    options: dict[str, list[str]] = {}
    for arg in argv:
        if arg.startswith("-") and len(arg) > 1:
            key, _, value = arg.lstrip("-").partition("=")
            options.setdefault(key, []).append(value)
        else:
            positionals.append(arg)
    return positionals, options


def _last(options: dict[str, list[str]], key: str) -> str | None:
    # An empty value (bare -key) means "not set", as an emptied `hsm set` line would.
    values = options.get(key)
    return values[-1] if values and values[-1] else None


def parse_options(options: dict[str, list[str]]) -> Options:
    mode = _last(options, "mode") or "block"
    if mode not in MODES:
        raise UsageError(f"-mode must be block or poll, not {mode!r}")
    return Options(
        tssd=_last(options, "tssd"),
        mode=mode,
        queue=_last(options, "queue"),
        priority=_priority(_last(options, "priority")),
        hsm_type=_last(options, "hsmType"),
        hsm_instance=_last(options, "hsmInstance"),
        reconnect_timeout=_seconds(_last(options, "reconnect-timeout")),
    )


def _priority(text: str | None) -> int | None:
    if text is None:
        return None
    if not is_int(text):
        raise UsageError(f"-priority must be an integer, not {text!r}")
    return int(text)


def _seconds(text: str | None) -> float:
    if text is None:
        return DEFAULT_RECONNECT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    # NaN fails every comparison, so it is refused by the first test.
    if not 0 <= value < _INFINITY:
        raise UsageError(f"-reconnect-timeout must be a number of seconds, not {text!r}")
    return value


def parse_pnfsid(text: str) -> str:
    if not PNFSID.fullmatch(text):
        raise UsageError(f"pnfsid {text[:80]!r} is not 1 to 64 hex digits")
    return text


def parse_transfer(verb: str, rest: list[str], options: dict[str, list[str]]) -> Transfer:
    if len(rest) < 2:
        raise UsageError(f"{verb} needs <pnfsid> <path>")
    if len(rest) > 2:
        raise UsageError(f"unexpected argument {rest[2][:80]!r}")
    pnfsid, path = parse_pnfsid(rest[0]), rest[1]
    if not path:
        raise UsageError("the path is empty")
    si = options.get("si")
    if si is None:
        raise UsageError(f"{verb} needs -si=<storage info>")
    return Transfer(pnfsid, path, parse_storage_info(si[-1]))


def parse_location(uri: str) -> Location:
    """A ``-uri=``: its bfid query parameter and its authority (the HSM instance)."""
    before_fragment = uri.partition("#")[0]
    scheme, sep, rest = before_fragment.partition("://")
    netloc = ""
    if sep and scheme and "?" not in scheme and "/" not in scheme:
        end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        netloc = rest[:end]
    if ("[" in netloc) != ("]" in netloc):
        raise UsageError(f"malformed -uri {uri[:200]!r}: Invalid IPv6 URL")
    bfid = query_value(before_fragment.partition("?")[2], "bfid")
    if not bfid:
        raise UsageError(f"-uri {uri[:200]!r} has no bfid")
    if not NAME.fullmatch(bfid):
        raise UsageError(f"-uri {uri[:200]!r}: bfid is not {NAME.pattern[1:-1]}")
    return Location(uri, bfid, netloc)


def query_value(query: str, name: str) -> str | None:
    """The first non-empty value of *name* in a query string, decoded as a form would be."""
    for pair in query.split("&"):
        key, sep, value = pair.partition("=")
        if sep and value and _unquote(key) == name:
            return _unquote(value)
    return None


def _unquote(text: str) -> str:
    text = text.replace("+", " ")
    if "%" not in text:
        return text
    from urllib.parse import unquote  # rare: tssd's own URIs never need it

    return unquote(text)


def parse_storage_info(text: str) -> StorageInfo:
    """Parse ``key=value;`` pairs and bare ``uri;`` locations as dCache joins them."""
    keys: dict[str, str] = {}
    locations: list[str] = []
    for entry in text.split(";"):
        if _is_uri(entry):
            locations.append(entry)
        elif "=" in entry:
            key, _, value = entry.partition("=")
            keys[key] = value
    store, group = keys.get("store") or None, keys.get("group") or None
    hsm = keys.get("hsm")
    return StorageInfo(
        size=_size(keys.get("size")),
        storage_class=_storage_class(keys.get("sClass"), store, group),
        hsm=hsm if hsm not in (None, "", "-") else None,
        store=store,
        group=group,
        adler32=_flag_adler32(keys.get("flag-c")),
        locations=tuple(locations),
    )


def _is_uri(entry: str) -> bool:
    # Values may contain "://" (a path=), so only an entry whose scheme precedes any "=" counts.
    scheme_end = entry.find("://")
    return scheme_end > 0 and "=" not in entry[:scheme_end]


def _size(text: str | None) -> int:
    if text is None:
        raise UsageError("storage info has no size=")
    if not is_int(text):
        raise UsageError(f"storage info size {text[:80]!r} is not an integer")
    size = int(text)
    if size < 0:
        raise UsageError(f"storage info size {size} is negative")
    return size


def _storage_class(sclass: str | None, store: str | None, group: str | None) -> str | None:
    if sclass and sclass != "-":
        return sclass
    return f"{store}:{group}" if store and group else None


def _flag_adler32(value: str | None) -> str | None:
    """The adler32 of ``flag-c`` (type 1), 8 lower-case hex digits; other types are ignored."""
    for item in (value or "").split(","):
        ctype, _, digits = item.partition(":")
        if ctype.strip() != "1":
            continue
        if not is_hex(digits, 8):
            raise UsageError(f"flag-c adler32 {digits[:80]!r} is not 1 to 8 hex digits")
        return digits.lower().zfill(8)
    return None
