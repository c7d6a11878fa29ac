"""Persistence: ORM models, engine, schema revision checks and the request store."""
