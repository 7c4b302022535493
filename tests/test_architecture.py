"""The layers of ``docs/architecture.md`` hold in the code: no import goes up a level or
sideways into another package of the same level, frameworks stay in the layers that may use
them, the HTTP edge's sub-packages keep their directions, no module imports relatively, no
import cycle among modules, and at most 8 modules at ``api/``'s root. The tables in the doc are
the rule: change both together. ``tests/test_architecture_rules.py`` shows each rule failing
on an injected violation (``violations``)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = {
    "api": REPO,
    "pipelines": REPO,
    "warehouse": REPO,
    "flagsight_core": REPO / "sdk" / "core",
    "flagsight_sdk": REPO / "sdk" / "python",
}
"""Each top-level package, and the folder it is imported from."""
PACKAGES = tuple(ROOTS)
FRAMEWORKS = ("falcon", "gunicorn", "dagster", "duckdb", "pyarrow")
EDGE = "api.web"
SHIPPED_ALONE = ("flagsight_core", "flagsight_sdk")
"""Packages that ship to applications: nothing of ``SERVICE``, ``api.settings`` included."""
SERVICE = ("api", "pipelines", "warehouse")
SHARED = "the shared modules"


def _table_rows(header: str) -> Iterator[list[str]]:
    """The rows of the doc's table whose first header cell is ``header``."""
    inside = False
    for line in (REPO / "docs" / "architecture.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == header:
            inside = True
        elif not line.startswith("|"):
            inside = False
        elif inside and not set(cells[0]) <= {"-"}:
            yield cells


def _names(cell: str) -> list[str]:
    return re.findall(r"`([a-z_.]+)`", cell)


@cache
def layers() -> dict[str, int]:
    """Package -> level, from the doc's table (``| 3 | state | `api.x`, `y` | ... |``)."""
    return {name: int(row[0]) for row in _table_rows("level") for name in _names(row[2])}


@cache
def frameworks() -> dict[str, tuple[str, ...]]:
    """Framework -> the packages that may import it, from the doc's table."""
    return {_names(row[0])[0]: tuple(_names(row[1])) for row in _table_rows("framework")}


@cache
def edge_directions() -> dict[str, tuple[str, ...]]:
    """Inside ``api.web``: part -> the parts it may import (``SHARED``: the shared modules)."""
    found: dict[str, tuple[str, ...]] = {}
    for row in _table_rows("inside `api.web`"):
        allowed = tuple(_names(row[1])) + ((SHARED,) if SHARED in row[1] else ())
        if "all of" in row[1]:
            allowed = ("*",)
        for part in _names(row[0]) or [SHARED]:
            found[part] = allowed
    return found


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Iterator[tuple[str, Path]]:
    for package, root in ROOTS.items():
        for path in sorted((root / package).rglob("*.py")):
            yield module_name(path, root), path


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _dynamic_import(node: ast.AST) -> str | None:
    """The literal name of ``importlib.import_module("x")`` or ``__import__("x")``."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func, first = node.func, node.args[0]
    called = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )
    if called and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """An ``ImportFrom``'s absolute module (a relative one resolved against ``module``)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def all_imports(source: str, module: str, is_package: bool = False) -> Iterator[tuple[str, int]]:
    """Every module ``source`` imports (not under ``if TYPE_CHECKING:``), with the import's
    level (0 absolute, more for a relative one), inside functions too."""

    def visit(nodes: list[ast.stmt]) -> Iterator[tuple[str, int]]:
        for node in nodes:
            if isinstance(node, ast.If) and _type_checking(node):
                yield from visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                yield from ((alias.name, 0) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, is_package, node)
                yield target, node.level
                yield from ((f"{target}.{alias.name}", node.level) for alias in node.names)
            for inner_node in ast.iter_child_nodes(node):
                if not isinstance(inner_node, ast.stmt | ast.ExceptHandler):
                    for call in ast.walk(inner_node):
                        if (name := _dynamic_import(call)) is not None:
                            yield name, 0
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    yield from visit(inner)
                elif isinstance(inner, list):
                    for handler in inner:
                        if isinstance(handler, ast.ExceptHandler):
                            yield from visit(handler.body)

    yield from visit(ast.parse(source).body)


def imports(path: Path) -> Iterator[str]:
    """The project modules the file at ``path`` imports (see ``all_imports``)."""
    name = module_name(path, next(r for p, r in ROOTS.items() if path.is_relative_to(r / p)))
    source = path.read_text()
    for target, _ in all_imports(source, name, path.name == "__init__.py"):
        if target.split(".")[0] in PACKAGES:
            yield target


def owner(module: str, levels: dict[str, int] | tuple[str, ...]) -> str | None:
    """The longest package of ``levels`` that ``module`` is, or is inside of."""
    best = None
    for package in levels:
        inside = module == package or module.startswith(package + ".")
        if inside and (best is None or len(package) > len(best)):
            best = package
    return best


def _edge_part(module: str) -> str:
    """Which part of ``api.web`` (the doc's directions table) ``module`` is."""
    parts = tuple(edge_directions())
    return owner(module, tuple(p for p in parts if p != SHARED)) or SHARED


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """What ``module``, made of ``source``, breaks of the doc's rules (empty: nothing)."""
    levels, wrong = layers(), []
    mine = owner(module, levels)
    for target, level in set(all_imports(source, module, is_package)):
        if level:
            wrong.append(f"{module} imports {target} relatively")
        top = target.split(".")[0]
        if top in FRAMEWORKS:
            allowed = frameworks()[top]
            if mine is None or not any(module == p or module.startswith(p + ".") for p in allowed):
                wrong.append(f"{module} imports {top}, allowed only in {', '.join(allowed)}")
            continue
        if top not in PACKAGES or mine is None:
            continue
        if top in SERVICE and module.split(".")[0] in SHIPPED_ALONE:
            wrong.append(f"{module} ships without the service, yet imports {target}")
            continue
        theirs = owner(target, levels)
        if theirs is None:
            continue
        if theirs != mine and levels[theirs] >= levels[mine]:
            wrong.append(f"{module} (level {levels[mine]}) imports {target} ({levels[theirs]})")
        elif theirs == mine == EDGE:
            here, there = _edge_part(module), _edge_part(target)
            allowed = edge_directions()[here]
            if here != there and "*" not in allowed and there not in allowed:
                wrong.append(f"{module} ({here}) imports {target} ({there}) inside the edge")
    return wrong


def test_every_shipped_module_belongs_to_a_layer() -> None:
    levels = layers()
    loose = [name for name, _ in modules() if owner(name, levels) is None and name not in PACKAGES]
    assert loose == [], "add these to docs/architecture.md's table, or move them"


def test_every_module_keeps_the_docs_rules() -> None:
    wrong = [
        problem
        for name, path in modules()
        for problem in violations(name, path.read_text(), path.name == "__init__.py")
    ]
    assert wrong == []


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``graph`` (module -> the modules it imports) meets."""
    seen: dict[str, int] = {}  # 1 on the path, 2 done
    cycles: list[list[str]] = []

    def walk(node: str, trail: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if nxt == node:
                continue
            if seen.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in seen:
                walk(nxt, [*trail, nxt])
        seen[node] = 2

    for start in sorted(graph):
        if start not in seen:
            walk(start, [start])
    return cycles


def test_modules_import_no_cycle() -> None:
    """Imports inside functions count: a lazy import that closes a circle makes it load, not
    go away (``errors.ErrorCode`` once reached the composed store that way)."""
    known = {name for name, _ in modules()}
    graph = {
        name: {target for target in imports(path) if target in known} for name, path in modules()
    }
    assert import_cycles(graph) == []


def test_api_keeps_at_most_eight_modules_at_its_root() -> None:
    assert len(list((REPO / "api").glob("*.py"))) <= 8


def test_the_sdk_and_the_core_import_nothing_of_the_service() -> None:
    """They ship to applications: the core with the service's own dependencies only where
    deciding needs them (the next test), never Falcon, gunicorn, Dagster, DuckDB or pyarrow;
    the core not even ``api.settings``, which the layer table puts below it."""
    service = r"(api|pipelines|warehouse|falcon|gunicorn|dagster|duckdb|pyarrow)"
    for path in [*(REPO / "sdk" / "python").rglob("*.py"), *(REPO / "sdk" / "core").rglob("*.py")]:
        text = path.read_text()
        assert not re.search(rf"^\s*(from|import) {service}\b", text, re.M), path
        name = module_name(path, path.parents[len(path.relative_to(REPO / "sdk").parts) - 2])
        assert not any(t.split(".")[0] in ("api", "pipelines", "warehouse")
                       for t, _ in all_imports(text, name)), path  # fmt: skip


def _distribution(requirement: str) -> str:
    """A requirement's distribution name, normalized (``google_re2>=1.1`` -> ``google-re2``)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name[0]).lower()


def test_the_core_imports_only_what_its_distribution_declares() -> None:
    """The core ships alone: each module it imports is of the standard library, of the core, or
    of a distribution ``sdk/core/pyproject.toml`` depends on (google-re2 provides ``re2``), so
    that installing it, or the SDK's ``local`` extra (equal to it), brings what it imports."""
    core = REPO / "sdk" / "core"
    declared = {
        _distribution(r)
        for r in tomllib.loads((core / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    providers = importlib.metadata.packages_distributions()
    wrong = []
    for path in sorted((core / "flagsight_core").rglob("*.py")):
        for target, _ in all_imports(path.read_text(), module_name(path, core)):
            top = target.split(".")[0]
            if top in sys.stdlib_module_names or top == "flagsight_core":
                continue
            found = {_distribution(d) for d in providers.get(top, [])}
            if not found & declared:
                wrong.append(
                    f"{module_name(path, core)} imports {top} ({found or 'not installed'})"
                )
    assert wrong == [], f"the core's pyproject declares {sorted(declared)}"


def test_the_pipelines_code_location_loads_no_http_framework() -> None:
    """An operator's Dagster code location imports neither Falcon nor gunicorn."""
    check = (
        "import sys, pipelines.definitions; "
        "assert 'falcon' not in sys.modules and 'gunicorn' not in sys.modules, "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('falcon', 'gunicorn'))"
    )
    done = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
