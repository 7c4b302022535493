"""The layers of ``docs/architecture.md`` hold in the code: no import goes up a level or
sideways into another package of the same level, no import cycle among modules, and at most
8 modules at ``api/``'s root. The table in the doc is the rule: change both together."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
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


def layers() -> dict[str, int]:
    """Package -> level, from the doc's table (``| 3 | state | `api.x`, `y` | ... |``)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    found: dict[str, int] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            for name in re.findall(r"`([a-z_.]+)`", cells[2]):
                found[name] = int(cells[0])
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


def imports(path: Path, top_level_only: bool = False) -> Iterator[str]:
    """The project modules ``path`` imports (not under ``if TYPE_CHECKING:``); with
    ``top_level_only``, only those run when the module is imported (not inside functions)."""

    def visit(nodes: list[ast.stmt]) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, ast.If) and _type_checking(node):
                yield from visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield node.module
                yield from (f"{node.module}.{alias.name}" for alias in node.names)
            if top_level_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    yield from visit(inner)
                elif isinstance(inner, list):
                    for handler in inner:
                        if isinstance(handler, ast.ExceptHandler):
                            yield from visit(handler.body)

    tree = ast.parse(path.read_text())
    for name in visit(tree.body):
        if name.split(".")[0] in PACKAGES:
            yield name


def owner(module: str, levels: dict[str, int]) -> str | None:
    """The longest package of the table that ``module`` is, or is inside of."""
    best = None
    for package in levels:
        inside = module == package or module.startswith(package + ".")
        if inside and (best is None or len(package) > len(best)):
            best = package
    return best


def test_every_shipped_module_belongs_to_a_layer() -> None:
    levels = layers()
    loose = [name for name, _ in modules() if owner(name, levels) is None and name not in PACKAGES]
    assert loose == [], "add these to docs/architecture.md's table, or move them"


def test_no_import_goes_up_a_level_or_sideways_into_another_package() -> None:
    levels = layers()
    wrong = []
    for name, path in modules():
        mine = owner(name, levels)
        if mine is None:
            continue
        for target in set(imports(path)):
            theirs = owner(target, levels)
            if theirs is None or theirs == mine:
                continue
            if levels[theirs] >= levels[mine]:
                wrong.append(f"{name} (level {levels[mine]}) imports {target} ({levels[theirs]})")
    assert wrong == []


def test_modules_import_no_cycle_when_loaded() -> None:
    known = {name for name, _ in modules()}
    graph = {
        name: {target for target in imports(path, top_level_only=True) if target in known}
        for name, path in modules()
    }
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
    assert cycles == []


def test_api_keeps_at_most_eight_modules_at_its_root() -> None:
    assert len(list((REPO / "api").glob("*.py"))) <= 8


def test_the_sdk_and_the_core_import_nothing_of_the_service() -> None:
    """They ship to applications: the core with the service's own dependencies only where
    deciding needs them (mmh3, numpy), never Falcon, gunicorn, Dagster, DuckDB or pyarrow."""
    service = r"(api|pipelines|warehouse|falcon|gunicorn|dagster|duckdb|pyarrow)"
    for path in [*(REPO / "sdk" / "python").rglob("*.py"), *(REPO / "sdk" / "core").rglob("*.py")]:
        text = path.read_text()
        assert not re.search(rf"^\s*(from|import) {service}\b", text, re.M), path
