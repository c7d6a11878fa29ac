"""Tape backends: one interface (``base``), one module or package per backend, one factory."""
