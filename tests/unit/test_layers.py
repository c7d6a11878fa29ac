"""The import layers of tssd (docs/architecture.md, "Layers"), read from the source with ast.

A module may import its own layer and the layers below it, never one above; module-level
imports among tssd's modules form no cycle. Imports under ``if TYPE_CHECKING:`` are not
run, so the layer check leaves them out; the cycle check counts them (a circle closed by
``TYPE_CHECKING`` is still a circle of types). A new module must be given a layer in
:data:`LAYERS`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "tssd"

#: Lowest first. A module belongs to the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "tssd.__init__",
            "tssd.errors",
            "tssd.config",
            "tssd.clock",
            "tssd.logs",
            "tssd.log_events",  # the declarations of the log events (reference pages)
            "tssd.files",
            "tssd.safepath",
            "tssd.ownership",
            "tssd.deployment",
            "tssd.background",
            "tssd.printable",  # the one control-character escaper of every renderer
            "tssd.shim.names",  # the name patterns; the rest of tssd.shim is a client
            "tssd.shim.endpoint",  # the clients' target and state directory, also config's
        ),
    ),
    (
        # The records, enums and interfaces the core owns, which db/ implements and every
        # layer above uses; and what is built on them alone.
        "domain",
        (
            "tssd.domain",  # Kind, State and the frozen records (Request, Drive, Mount, ...)
            "tssd.lifecycle",  # the named transitions and the ledger the stores implement
            "tssd.backends.catalog",  # the backends' catalog records and interfaces
            "tssd.work",  # the scheduler's work signal, which the stores wake
            "tssd.ports",  # the narrow interfaces db/ implements (reports, cluster, ...)
            "tssd.submit",
            "tssd.bodies",
            "tssd.metrics",
            "tssd.retry",
        ),
    ),
    ("db", ("tssd.db",)),
    ("tape", ("tssd.tape", "tssd.backends")),
    (
        "scheduler",
        ("tssd.scheduler", "tssd.health", "tssd.backpressure", "tssd.cluster", "tssd.activity"),
    ),
    ("services", ("tssd.services", "tssd.metrics_db")),
    ("serving", ("tssd.api", "tssd.endit", "tssd.delivery")),
    ("app", ("tssd.app", "tssd.simulate")),
    ("clients", ("tssd.cli", "tssd.shim", "tssd.hsm", "tssd.wire", "tssd.testing")),
    # The reference pages are generated from every layer's declarations.
    ("reference", ("tssd.reference",)),
)


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    top: bool  # at module level (run on import), not inside a function
    typing: bool = False  # under ``if TYPE_CHECKING:`` (never run)


def module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


MODULES = module_names()


def layer_of(module: str) -> int:
    key = "tssd.__init__" if module == "tssd" else module
    best, found = -1, -1
    for index, (_name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (key == prefix or key.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, source: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: resolve against the importing package
            package = source if MODULES[source].name == "__init__.py" else source.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                package = package.rsplit(".", 1)[0]
            base = f"{package}.{base}" if base else package
        # `from tssd.cli import render` imports the module tssd.cli.render.
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    for name in dict.fromkeys(names):
        module = name
        while module not in MODULES and "." in module:
            module = module.rsplit(".", 1)[0]  # `import tssd.db.models.X` -> tssd.db.models
        if module in MODULES:
            yield module


def imports_of(source: str, text: str | None = None, *, typing: bool = False) -> list[Import]:
    """The imports of *source*; with *typing*, also those under ``if TYPE_CHECKING:``."""
    found: list[Import] = []

    def visit(body: list[ast.stmt], top: bool, checking: bool = False) -> None:
        for node in body:
            if isinstance(node, ast.If) and _type_checking(node):
                if typing:
                    visit(node.body, top, True)
                visit(node.orelse, top, checking)
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.extend(
                    Import(source, t, node.lineno, top, checking) for t in _targets(node, source)
                )
            inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child], inner, checking)
                elif isinstance(child, ast.excepthandler | ast.match_case):
                    visit(child.body, inner, checking)

    visit(ast.parse(MODULES[source].read_text() if text is None else text).body, True)
    return [i for i in found if i.target != source]


ALL_IMPORTS = [i for module in sorted(MODULES) for i in imports_of(module, typing=True)]
#: The imports that run (the layer check's).
IMPORTS = [i for i in ALL_IMPORTS if not i.typing]


def test_every_module_has_a_layer() -> None:
    assert [m for m in sorted(MODULES) if layer_of(m) < 0] == []


def test_no_module_imports_a_higher_layer() -> None:
    """Imports inside functions count too: a deferred upward import is still upward."""
    upward = [
        f"{i.source}:{i.line} ({LAYERS[layer_of(i.source)][0]}) imports {i.target} "
        f"({LAYERS[layer_of(i.target)][0]})"
        for i in IMPORTS
        if layer_of(i.target) > layer_of(i.source)
    ]
    assert upward == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _module_edges(imports: list[Import]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in imports:
        if i.top:
            edges[i.source].add(i.target)
    return edges


def test_no_import_cycle() -> None:
    assert _cycles(_module_edges(IMPORTS)) == []


def test_no_cycle_closed_by_type_checking() -> None:
    """A circle whose back edge is an ``if TYPE_CHECKING:`` import is a circle of types:
    the shared types belong in a module below both (issue 41)."""
    assert _cycles(_module_edges(ALL_IMPORTS)) == []


#: Where the simulated library may be imported: the backends (``factory.py`` picks it) and
#: ``tssd simulate``. The reference pages read its declared log events, nothing else.
SIM = "tssd.backends.sim"
SIM_USERS = ("tssd.backends", "tssd.simulate")
SIM_DECLARATIONS = {("tssd.reference.events", "tssd.backends.sim.log_events")}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _sim_outside(imports: list[Import]) -> list[str]:
    return [
        f"{i.source}:{i.line} imports {i.target}"
        for i in imports
        if _within(i.target, (SIM,))
        and not _within(i.source, SIM_USERS)
        and (i.source, i.target) not in SIM_DECLARATIONS
    ]


def test_the_simulated_library_is_imported_by_backends_and_simulate_only() -> None:
    """The scheduler and the rest plan on backend-neutral models (``tssd/tape/``); an
    import inside a function or under ``TYPE_CHECKING`` counts too."""
    assert _sim_outside(ALL_IMPORTS) == []


def test_the_simulator_check_sees_every_kind_of_import() -> None:
    text = (
        "from tssd.backends.sim.layout import Layout\n"
        "if TYPE_CHECKING:\n    from tssd.backends.sim import truth\n"
        "def f():\n    import tssd.backends.sim.faults\n"
    )
    found = imports_of("tssd.scheduler.calibrate", text, typing=True)
    assert [line.split(" ", 1)[0] for line in _sim_outside(found)] == [
        "tssd.scheduler.calibrate:1",
        "tssd.scheduler.calibrate:3",
        "tssd.scheduler.calibrate:5",
    ]
    assert _sim_outside(imports_of("tssd.simulate.runner", text, typing=True)) == []


def test_the_reader_sees_deferred_and_skips_type_checking_imports() -> None:
    text = (
        "from tssd.cli import render\n"
        "if TYPE_CHECKING:\n    from tssd.app import serve\n"
        "def f():\n    import tssd.db.models.Request\n"
    )
    found = {(i.target, i.top) for i in imports_of("tssd.domain", text)}
    assert found == {("tssd.cli.render", True), ("tssd.db.models", False)}
    typed = {(i.target, i.typing) for i in imports_of("tssd.domain", text, typing=True)}
    assert typed == {("tssd.cli.render", False), ("tssd.app", True), ("tssd.db.models", False)}
    assert layer_of("tssd.shim.names") < layer_of("tssd.db.store") < layer_of("tssd.shim.main")


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_only_the_database_layer_imports_sqlalchemy() -> None:
    """Issue 19: SQL lives in ``tssd/db/`` only (TYPE_CHECKING imports count too)."""
    outside = []
    for module, path in sorted(MODULES.items()):
        if module == "tssd.db" or module.startswith("tssd.db."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            outside += [f"{module}:{node.lineno}" for n in names if n.split(".")[0] == "sqlalchemy"]
    assert outside == []


#: What the backends never import: the database's session factory, engine and ORM rows.
DATABASE_INTERNALS = ("sqlalchemy", "tssd.db.models", "tssd.db.engine")


def _database_imports(module: str, text: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(_within(n, DATABASE_INTERNALS) for n in names):
            found.append(f"{module}:{node.lineno}")
    return found


def test_the_backends_import_no_session_engine_or_orm_class() -> None:
    """A backend reaches its catalog through ``tssd.backends.catalog`` (records and
    interfaces that db/ implements); an import inside a function or under
    ``TYPE_CHECKING`` counts too."""
    outside = [
        hit
        for module, path in sorted(MODULES.items())
        if _within(module, ("tssd.backends",))
        for hit in _database_imports(module, path.read_text())
    ]
    assert outside == []


def test_the_backend_check_sees_every_kind_of_database_import() -> None:
    text = (
        "import sqlalchemy\n"
        "from tssd.db import models\n"
        "if TYPE_CHECKING:\n    from tssd.db.engine import Sessions\n"
        "def f():\n    from tssd.db.models import SimObject\n"
        "from tssd.db.sim_catalog import SimCatalogTables\n"
    )
    assert _database_imports("m", text) == ["m:1", "m:2", "m:4", "m:6"]


#: The ORM: its module, and the classes mapped there (read from the registry, so a new
#: table's class is covered the day it is declared).
MODELS = "tssd.db.models"


def _orm_classes() -> frozenset[str]:
    from tssd.db.models import Base

    return frozenset(mapper.class_.__name__ for mapper in Base.registry.mappers)


def _absolute(node: ast.ImportFrom, source: str) -> str:
    """The module *node* imports from, relative imports resolved against *source*."""
    if not node.level:
        return node.module or ""
    package = source if MODULES[source].name == "__init__.py" else source.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        package = package.rsplit(".", 1)[0]
    return f"{package}.{node.module}" if node.module else package


def _orm_outside(source: str, text: str | None = None) -> list[str]:
    """Where *source* imports the ORM: the module ``tssd.db.models`` itself, or an ORM
    class by its name from any ``tssd.db`` module (a re-export is still the row)."""
    if _within(source, ("tssd.db",)):
        return []
    found = [
        f"{source}:{i.line} imports {i.target}"
        for i in imports_of(source, text, typing=True)
        if i.target == MODELS
    ]
    classes = _orm_classes()
    tree = ast.parse(MODULES[source].read_text() if text is None else text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _within(_absolute(node, source), ("tssd.db",)):
            found += [
                f"{source}:{node.lineno} imports the ORM class {a.name}"
                for a in node.names
                if a.name in classes
            ]
    return sorted(set(found))


def test_no_orm_class_is_imported_above_the_database_layer() -> None:
    """Above ``tssd/db/`` a request, a drive or a mount is a ``tssd.domain`` record: no
    module imports ``tssd.db.models`` or one of its classes (inside a function or under
    ``TYPE_CHECKING`` too), the backends included."""
    assert [hit for module in sorted(MODULES) for hit in _orm_outside(module)] == []


def test_the_orm_check_sees_every_kind_of_import() -> None:
    text = (
        "from tssd.db.models import Kind\n"
        "from tssd.db import models\n"
        "if TYPE_CHECKING:\n    from tssd.db.store import Request\n"
        "def f():\n    import tssd.db.models\n    from ..db.glance import Mount\n"
        "from tssd.domain import Request\n"
    )
    found = _orm_outside("tssd.scheduler.intake", text)
    assert [hit.split(" ", 1)[0] for hit in found] == [
        "tssd.scheduler.intake:1",
        "tssd.scheduler.intake:2",
        "tssd.scheduler.intake:4",
        "tssd.scheduler.intake:6",
        "tssd.scheduler.intake:7",
    ]
    assert _orm_outside("tssd.db.views", text) == []
    assert _orm_outside("tssd.backends.sim.catalog", text) != []
    assert {"Request", "Mount", "Drive", "SimTape"} <= _orm_classes()


#: What no module above ``tssd/db/`` names (issue "the database boundary"): the handles
#: of the database itself. ``tssd.db.books`` hands out the ports instead.
DATABASE_HANDLES = frozenset(
    {
        "session_factory",
        "Sessions",
        "async_sessionmaker",
        "AsyncEngine",
        "AsyncSession",
        "Engine",
        "create_engine",
        "memory_engine",
    }
)
#: What a store holds for ``tssd/db/`` alone: its sessions, engine, counts, statistics.
STORE_INTERNALS = frozenset({"sessions", "engine", "tally", "statistics"})


def _is_store(node: ast.expr) -> bool:
    """``store``, ``self.store``, ``services.store``, ``self._store``, ``request_store``:
    a name or attribute that names a store (the scheduler's ``self.sessions``, its
    :class:`~tssd.scheduler.drive_session.DriveSessions`, is on ``self``: no store)."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return isinstance(name, str) and name.lstrip("_").endswith("store")


def _implementation(module: str, name: str) -> bool:
    """Whether *name* of the ``tssd.db`` module *module* is a class of db/ that
    implements something: not an interface, a frozen record, an enum or an error."""
    import enum
    import importlib
    import inspect

    obj = getattr(importlib.import_module(module), name, None)
    if not inspect.isclass(obj) or not _within(obj.__module__, ("tssd.db",)):
        return False
    if getattr(obj, "_is_protocol", False) or issubclass(obj, BaseException | tuple | enum.Enum):
        return False
    params = getattr(obj, "__dataclass_params__", None)
    return not (params is not None and params.frozen)


def _boundary_breaches(source: str, text: str | None = None) -> list[str]:
    """Where *source* (above ``tssd/db/``) imports SQLAlchemy, a database handle or an
    implementation class of db/, or reaches into a store's SQL internals."""
    if _within(source, ("tssd.db",)):
        return []
    tree = ast.parse(MODULES[source].read_text() if text is None else text)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"{source}:{node.lineno} imports {a.name}"
                for a in node.names
                if _within(a.name, ("sqlalchemy",))
            ]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, source)
            for a in node.names:
                if _within(base, ("sqlalchemy",)) or a.name in DATABASE_HANDLES:
                    found.append(f"{source}:{node.lineno} imports {a.name} from {base}")
                elif _within(base, ("tssd.db",)) and _implementation(base, a.name):
                    found.append(f"{source}:{node.lineno} imports the db class {a.name}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in STORE_INTERNALS
            and _is_store(node.value)
        ):
            found.append(f"{source}:{node.lineno} reaches .{node.attr} of a store")
    return sorted(found, key=lambda hit: int(hit.split(" ", 1)[0].rsplit(":", 1)[1]))


def test_nothing_above_the_database_layer_holds_sessions_engines_or_db_classes() -> None:
    """Above ``tssd/db/`` (``tssd/app.py`` and ``tssd/simulate/`` included) every book is
    a port: the composition root gets them all from :mod:`tssd.db.books`. No module
    imports SQLAlchemy, the session factory or an engine, or a class of db/ that is not an
    interface or a frozen record, or reaches ``.sessions``, ``.engine``, ``.tally`` or
    ``.statistics`` of a store; inside functions and under ``TYPE_CHECKING`` too."""
    assert [hit for module in sorted(MODULES) for hit in _boundary_breaches(module)] == []


def test_the_boundary_check_sees_every_kind_of_breach() -> None:
    text = (
        "import sqlalchemy.orm\n"
        "from tssd.db.engine import session_factory\n"
        "if TYPE_CHECKING:\n    from tssd.db.store import RequestStore\n"
        "def f(store, services):\n"
        "    store.sessions\n"
        "    services.store.engine\n"
        "    self._store.tally\n"
        "    from tssd.db.memory import MemoryStore\n"
        "    from tssd.db.engine import Sessions\n"
        "from tssd.db.pages import ListFilter\n"
        "from tssd.db.interface import RequestStoreInterface, MountBook\n"
        "from tssd.db.books import Books, open_books\n"
        "from tssd.db.engine import DatabaseError, is_transient\n"
        "self.sessions.of('drive0').floor\n"
        "runner.sessions.yielding()\n"
        "store.submit\n"
    )
    found = _boundary_breaches("tssd.scheduler.intake", text)
    assert [hit.split(" ", 1)[0] for hit in found] == [
        f"tssd.scheduler.intake:{n}" for n in (1, 2, 4, 6, 7, 8, 9, 10)
    ]
    assert _boundary_breaches("tssd.db.books", text) == []
