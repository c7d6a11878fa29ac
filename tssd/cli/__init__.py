"""Command-line entry points: ``tssd`` (daemon and admin) and ``tssctl`` (operator CLI)."""
