"""The backends' catalogs in tssd's database: the gateway the backend factory hands on.

A backend asks it for its tables (:class:`tssd.backends.catalog.CatalogGateway`); each
call makes a fresh, cheap object over the one session factory. The return types are the
interfaces, so that mypy checks here that the SQL tables implement them.
"""

from __future__ import annotations

from tssd.backends.catalog import ScsiTables, SimTables
from tssd.db.engine import Sessions
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.db.sim_catalog import SimCatalogTables


class SqlCatalogs:
    """The catalogs kept in the database of *sessions*."""

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    def sim(self) -> SimTables:
        return SimCatalogTables(self._sessions)

    def scsi(self) -> ScsiTables:
        return ScsiCatalogTables(self._sessions)
