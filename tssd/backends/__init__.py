"""Tape backends: one interface (``base``), one package per backend, one factory.

A backend is its package with a ``backend.py`` whose ``create`` builds it, and its line
in ``factory.BUILDERS``. A backend that keeps its catalog in tssd's database reaches it
through ``catalog`` (records and interfaces that ``tssd.db`` implements), never through a
session or an ORM row.
"""
