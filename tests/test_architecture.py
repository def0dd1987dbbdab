"""The package's import graph: the module-level circles that remain, and no new one.

Why a test: a circle lets a change in either module break the other at import time, and
hides which of them is the lower layer. `lint-imports` (pyproject.toml) enforces the layers;
this test, with grimp (import-linter's graph library), holds every module-level circle.
Imports made only for type checking do not count.
"""

from __future__ import annotations

from pathlib import Path

import grimp

# Circles not yet broken, each to be removed from here when it is (none left).
KNOWN_CIRCLES: set[frozenset[str]] = set()


def module_circles(graph: grimp.ImportGraph) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: set[frozenset[str]] = set()

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.add(frozenset(component))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return circles


def test_no_module_level_import_circle_beyond_the_known_ones() -> None:
    graph = grimp.build_graph("semsearch", exclude_type_checking_imports=True, cache_dir=None)
    circles = module_circles(graph)
    assert circles - KNOWN_CIRCLES == set(), "a new import circle"
    assert KNOWN_CIRCLES - circles == set(), "a known circle is gone: remove it from the list"


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=importer, imported=imported)
    assert module_circles(graph) == {frozenset({"p.a", "p.b", "p.c"})}


def test_every_module_is_in_the_architecture_page() -> None:
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted(
        path.relative_to(root).as_posix() for path in (root / "semsearch").rglob("*.py")
    )
    missing = [module for module in modules if f"`{module}`" not in page]
    assert not missing, f"add these to docs/architecture.md with their one-line role: {missing}"
