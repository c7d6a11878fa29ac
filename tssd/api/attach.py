"""Whether a migration may attach to the open migration of its pnfsid.

A pnfsid names one file in dCache, but two pools can hold different bytes under it (a
replica rewritten, a pool restored from an old disk). A put from pool B that attached to
pool A's open migration of the pnfsid would exit 0 with A's URI, and B's bytes would
never reach tape. So a migration attaches only when its size, and its adler32 where
both name one, agree with the open one's; otherwise it is refused (409, ``OtherFile``,
exit code 1: dCache flushes it again later, by when A's has finished and B's is a new
migration). Recalls always attach: there is one file to read, whoever asked.
"""

from __future__ import annotations

import structlog

from tssd.errors import OtherFile
from tssd.files import same_adler32
from tssd.metrics import Metrics
from tssd.submit import SubmitSpec

log = structlog.get_logger()


def check_attach(
    metrics: Metrics, spec: SubmitSpec, request_id: int, size: int | None, checksum: str | None
) -> None:
    """Refuse *spec* (raise :class:`OtherFile`) unless it is the file that the open request
    of its kind and pnfsid (*request_id*, of *size* and *checksum*) is for."""
    if spec.kind.value != "migrate":
        return
    same_size = size is None or spec.size is None or size == spec.size
    same_sum = checksum is None or spec.checksum is None or same_adler32(checksum, spec.checksum)
    if same_size and same_sum:
        return
    metrics.attach_refused_total.inc()
    log.warning("request.attach_refused", request_id=request_id, pnfsid=spec.pnfsid,
                path=spec.path, size=spec.size, checksum=spec.checksum, open_size=size,
                open_checksum=checksum)  # fmt: skip
    raise OtherFile(
        f"pnfsid {spec.pnfsid} is being migrated from another file (request "
        f"{request_id}: {size} bytes, adler32 {checksum}; this file: {spec.size} bytes, "
        f"adler32 {spec.checksum}); not attached, retry once that migration has finished"
    )
