"""The OpenAPI schemas of the request bodies, derived from their one declaration
(:mod:`tssd.bodies`): what the API validates is what its document says."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from tssd.bodies import BODIES

REF = "#/components/schemas/{name}"


@cache
def body_schemas() -> dict[str, Any]:
    """``components.schemas`` entries of every body and the types they name (``Kind``)."""
    _, components = msgspec.json.schema_components(BODIES, ref_template=REF)
    return components


def body_ref(name: str) -> dict[str, str]:
    if name not in body_schemas():
        raise KeyError(f"no request body {name!r} in tssd.bodies")
    return {"$ref": REF.format(name=name)}


def request_body(name: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": body_ref(name)}}}
