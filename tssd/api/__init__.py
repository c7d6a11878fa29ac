"""The HTTP API (aiohttp) over the Unix socket and, optionally, TCP."""
