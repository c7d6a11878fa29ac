"""docs/reference/http-api.md: every route and body schema, from the OpenAPI document."""

from __future__ import annotations

from typing import Any

from tssd.api.openapi import openapi_document
from tssd.reference.table import table


def _body(operation: dict[str, Any]) -> str:
    content = operation.get("requestBody", {}).get("content", {})
    refs = [
        media.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1] or media_type
        for media_type, media in content.items()
    ]
    return ", ".join(f"[{r}](#{r.lower()})" if r.isidentifier() else f"`{r}`" for r in refs)


def _parameters(operation: dict[str, Any]) -> str:
    return ", ".join(f"`{p['name']}` ({p['in']})" for p in operation.get("parameters", []))


def _schema_rows(schema: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    required = set(schema.get("required", ()))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or prop.get("$ref", "").rsplit("/", 1)[-1] or "any"
        limits = ", ".join(
            f"{key} {prop[key]:,}" if isinstance(prop[key], int) else f"{key} {prop[key]}"
            for key in ("minimum", "maximum", "minLength", "maxLength", "maxItems", "pattern")
            if key in prop
        )
        rows.append((f"`{name}`", str(kind), "yes" if name in required else "", limits))
    return rows


def render() -> str:
    document = openapi_document()
    routes = [
        (
            f"`{method.upper()} {path}`",
            op.get("summary", ""),
            _parameters(op),
            _body(op),
            " ".join(sorted(op.get("responses", {}))),
        )
        for path, methods in document["paths"].items()
        for method, op in methods.items()
    ]
    parts = [
        "# HTTP API\n\n"
        f"{document['info']['title']}, version {document['info']['version']}. The same "
        "document as OpenAPI 3 JSON: `GET /openapi.json`. How to reach the API (Unix socket, "
        "TCP with a bearer token) and the roles: docs/api.md.\n\n## Routes\n\n",
        table(("route", "what", "parameters", "body", "answers"), routes),
        "\n## Bodies\n",
    ]
    for name, schema in sorted(document["components"]["schemas"].items()):
        description = " ".join(str(schema.get("description", "")).split())
        rows = _schema_rows(schema)
        parts.append(f"\n### {name}\n\n" + (f"{description}\n\n" if description else ""))
        parts.append(table(("field", "type", "required", "bounds"), rows) if rows else "")
    return "".join(parts)
