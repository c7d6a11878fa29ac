"""The interfaces the core owns and ``tssd/db/`` implements, one module per concept.

Each port is a :class:`typing.Protocol` whose docstrings state the contract; ``tssd/db/``
implements it in SQL (SQLite, PostgreSQL) and in memory, and the contract suites in
``tests/integration`` run one set of tests on all three. ``tssd/app.py`` (the composition
root) gets every implementation from ``tssd.db.books`` and hands each component only the
port it needs: above ``tssd/db/`` nothing holds a session factory, an engine or an ORM
row (``tests/unit/test_layers.py``).

Besides these modules, the domain layer's other interfaces live with their records:
:class:`tssd.lifecycle.RequestLedger` (the named transitions of a request) and
:mod:`tssd.backends.catalog` (the backends' catalogs).
"""
