"""The house rules of DESIGN.md, checked on the source: imports point down, and never in a circle.

Every ``import`` in ``src/fugu`` counts, including those inside functions (a lazy import is
still a dependency) and ``importlib.import_module("fugu....")`` with a literal name; only imports
under ``if TYPE_CHECKING:`` are left out, since they never run.

Layers, top to bottom::

    cli/, demo, report/          (the screen: may import everything below)
    central/ blowfish/ graph/ ldp/   (mechanisms)
    engines/                     (counting: imports the core only, never a mechanism)
    core: domain, histogram, queries, noise, budget, mechanism, release, inference/, datasets/,
          testing/, errors
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

SRC = Path(__file__).resolve().parents[2] / "src" / "fugu"
SCREEN = ("fugu.cli", "fugu.demo", "fugu.report", "fugu.__main__")
MECHANISMS = ("fugu.central", "fugu.blowfish", "fugu.graph", "fugu.ldp")
ENGINES = ("fugu.engines",)


def _module_name(path: Path) -> str:
    parts = ["fugu", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The fugu modules that ``path`` imports (resolved to modules that exist)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(target: str) -> None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("fugu"):
                        resolve(alias.name)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                if mod.startswith("fugu"):
                    for alias in child.names:  # "from . import x" may name a submodule
                        sub = f"{mod}.{alias.name}"
                        resolve(sub if sub in modules else mod)
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute | ast.Name)
                and getattr(child.func, "attr", getattr(child.func, "id", "")) == "import_module"
                and child.args
                and isinstance(child.args[0], ast.Constant)
                and str(child.args[0].value).startswith("fugu")
            ):  # importlib.import_module("fugu.report...") is an import too
                resolve(str(child.args[0].value))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _graph() -> nx.DiGraph:
    paths = sorted(SRC.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for p in paths:
        for target in _imports(p, modules):
            g.add_edge(_module_name(p), target)
    return g


def _in(module: str, layer: tuple[str, ...]) -> bool:
    return any(module == top or module.startswith(top + ".") for top in layer)


def _is_core(module: str) -> bool:
    return module != "fugu" and not _in(module, SCREEN + MECHANISMS + ENGINES)


def test_the_import_walker_sees_imports() -> None:
    g = _graph()
    assert g.has_edge("fugu.central.laplace", "fugu.mechanism")
    assert g.number_of_edges() > 100


def test_no_import_cycles() -> None:
    g = _graph()
    # The package's own __init__ re-exports everything and is imported by nobody inside fugu.
    cycles = [c for c in nx.simple_cycles(g.subgraph(set(g) - {"fugu"}), length_bound=8)]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_nothing_below_the_screen_imports_the_screen() -> None:
    g = _graph()
    bad = [
        f"{a} -> {b}"
        for a, b in g.edges
        if _in(b, SCREEN) and (_in(a, MECHANISMS + ENGINES) or _is_core(a))
    ]
    assert not bad, "mechanisms, engines and the core must not import cli/report/demo:\n" + (
        "\n".join(sorted(bad))
    )


def test_engines_import_no_mechanism() -> None:
    g = _graph()
    bad = [f"{a} -> {b}" for a, b in g.edges if _in(a, ENGINES) and _in(b, MECHANISMS)]
    assert not bad, "engines only count; they take a partial function, not a mechanism:\n" + (
        "\n".join(sorted(bad))
    )


def test_the_core_imports_no_mechanism() -> None:
    g = _graph()
    bad = [f"{a} -> {b}" for a, b in g.edges if _is_core(a) and _in(b, MECHANISMS)]
    assert not bad, "the core must not import mechanisms:\n" + "\n".join(sorted(bad))
