"""The exception tree of tssd.

Every error tssd raises derives from :class:`TssdError`. Errors that come from a driver
(database, backend library, operating system) are translated at the module boundary with
``raise ... from exc`` so that callers handle one small tree.

Each error carries ``exit_code``: the ``tss-hsm`` exit code (docs/dcache.md, "Exit codes") that a
request failing with this error reports to dCache.
"""

from __future__ import annotations


class TssdError(Exception):
    """Root of every tssd error."""

    exit_code: int = 1


class ConfigError(TssdError):
    """The configuration is invalid (unknown key, wrong type, bad value)."""

    exit_code = 32


class SchemaError(TssdError):
    """The database schema is not at the revision this code expects."""


class InvalidRequest(TssdError):
    """A request is malformed: bad pnfsid, size, storage class, URI or state change."""

    exit_code = 32


class OutsidePoolRoots(InvalidRequest):
    """A pool path (recall destination, migrate source) outside every pool root.

    The request is well formed; tssd is installed without the pool's data directory
    among its roots. Exit code 1, which dCache retries once that is fixed, not 32: a
    flush failing with 30-39 is set aside until an admin acts (StorageClassInfo.java).
    """

    exit_code = 1


class NotFound(TssdError):
    """No request, tape or drive with that identifier."""


class Conflict(TssdError):
    """The operation conflicts with the current state (e.g. cancel a finished request)."""


class OtherFile(Conflict):
    """A migration names the pnfsid of an open one, but another file (size or adler32).

    Exit code 1: dCache tries the flush again later, when the open one has finished.
    """


class ShuttingDown(TssdError):
    """The daemon is stopping and accepts no new work."""


class NotSupported(TssdError):
    """The configured backend does not offer this operation (e.g. catalog import)."""


class BackendError(TssdError):
    """A tape backend operation failed."""

    #: Backend specific return code (e.g. the IBM SP ``dsmrc``), for diagnostics.
    code: int | None

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TransientBackendError(BackendError):
    """Retrying the same operation later may succeed (mount not possible, busy, ...)."""


class PermanentBackendError(BackendError):
    """Retrying will not help: the object does not exist, the data is corrupt, ..."""

    exit_code = 31


class ObjectNotFound(PermanentBackendError):
    """The backend holds no copy of the object."""


class TooLargeForTape(PermanentBackendError):
    """More bytes than the largest cartridge of the library holds: no retry can write them."""


class ChecksumMismatch(PermanentBackendError):
    """The bytes read do not match the checksum recorded for the object."""


class ExpectedChecksumMismatch(ChecksumMismatch):
    """The bytes read are the tape copy's, but not what the request expects (``flag-c``).

    Nothing is committed at the destination. The request's own data error, never counted
    against the drive or the tape (tssd.health).
    """


class DataError(TssdError):
    """Reading or writing a file on the local (pool) disk failed."""


class SourceUnreadable(DataError):
    """The file to migrate cannot be read."""

    exit_code = 42


class DestinationUnwritable(DataError):
    """The recall destination cannot be written."""

    exit_code = 43


class NoSpace(DataError):
    """The recall destination's file system is full."""

    exit_code = 41


class AccessDenied(DataError):
    """tssd's own user may not read or write a pool path (EACCES, EPERM).

    A fault of how tssd is installed (it must run as the pool's user), not of the pool's
    disk: exit code 1, which dCache retries, and never 41-43, which disable the pool.
    """


class DatabaseUnavailable(TssdError):
    """The database cannot be reached or opened (server down, bad credentials, no file)."""


class WireError(TssdError):
    """A client (``tssctl``, ``tss-hsm``) could not reach tssd, or the answer was not the API."""


class ApiError(TssdError):
    """tssd answered a client with an error status; ``payload`` is its JSON error object.

    ``exit_code`` is the one tssd names for the request (1 when it names none or no
    integer), ``retry_after_s`` when admission control's 503 says when to call again (1 s
    when it does not say).
    """

    def __init__(self, status: int, payload: dict[str, object]) -> None:
        raw = payload.get("error")
        err: dict[str, object] = raw if isinstance(raw, dict) else {}
        message = str(err.get("message") or payload or f"HTTP {status}")
        super().__init__(message)
        self.status = status
        self.type = str(err.get("type", "Error"))
        self.message = message
        code = err.get("exit_code")
        #: Whether tssd named the code; a 400 that names none is taken as a bad argument.
        self.exit_code_named = type(code) is int
        self.exit_code = code if type(code) is int else 1
        after = err.get("retry_after_s")
        self.retry_after_s = float(after) if isinstance(after, int | float) else 1.0
