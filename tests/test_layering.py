"""The packages depend only downward and no import leads back to where it started, over any number of
modules (not even inside functions).

Layers (README, "Layout"): ``graph_builders`` <- core (``hydragnn_ensemble`` without its CLI) <-
``hpo`` <- {``scheduler``, ``ensemble``} <- the CLI (``hydragnn_ensemble.cli``), which wires them.

    python tests/test_layering.py          # prints the package import graph and module cycles
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("graph_builders", "hydragnn_ensemble", "hpo", "scheduler", "ensemble")
LAYER = {"graph_builders": 0, "core": 1, "hpo": 2, "scheduler": 3, "ensemble": 3, "cli": 4}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer_of(module: str) -> str:
    if module.startswith("hydragnn_ensemble.cli") or module == "hydragnn_ensemble.__main__":
        return "cli"
    top = module.split(".")[0]
    return "core" if top == "hydragnn_ensemble" else top


def module_imports() -> dict[str, set[str]]:
    """Every module of our packages -> the modules of our packages it imports (anywhere in it)."""
    modules = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets.add(base)
                targets.update(f"{base}.{a.name}" for a in node.names)
        out[name] = {t for t in targets if t in modules and t != name and t.split(".")[0] in PACKAGES}
    return out


def layer_edges(imports: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(from layer, to layer) -> examples ``a -> b`` of module imports across layers."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for src, targets in imports.items():
        for dst in targets:
            a, b = _layer_of(src), _layer_of(dst)
            if a != b:
                edges[(a, b)].append(f"{src} -> {dst}")
    return edges


def module_cycles(imports: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Groups of modules whose imports lead around in a circle, of any length (the strongly
    connected components of the import graph with more than one module; Tarjan's algorithm). Every
    edge counts, a package's ``__init__`` re-exporting its submodules too: a submodule that imports
    its own package (``from pkg import x``) closes a circle through it."""
    graph = {a: sorted(targets) for a, targets in imports.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[tuple[str, ...]] = []

    def visit(start: str) -> None:  # iterative: deep import chains must not hit the recursion limit
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(tuple(sorted(group)))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(groups)


def test_packages_depend_only_downward():
    upward = {k: v for k, v in layer_edges(module_imports()).items() if LAYER[k[0]] <= LAYER[k[1]]}
    assert upward == {}, "imports against the layering:\n" + "\n".join(
        f"{a} -> {b}: {', '.join(sorted(v)[:5])}" for (a, b), v in upward.items())


def test_no_import_cycle_of_any_length():
    assert module_cycles(module_imports()) == []


def test_the_cycle_finder_finds_long_cycles():
    """It can fail: a circle of three modules, and a submodule importing its package (which
    re-exports it); a package importing a submodule that imports nothing back is no cycle."""
    imports = {"a.x": {"a.y"}, "a.y": {"b.z"}, "b.z": {"a.x"}, "c": {"c.d"}, "c.d": set(), "e": {"e.f"},
               "e.f": {"e"}}
    assert module_cycles(imports) == [("a.x", "a.y", "b.z"), ("e", "e.f")]


if __name__ == "__main__":
    imports = module_imports()
    for (a, b), examples in sorted(layer_edges(imports).items()):
        mark = "  " if LAYER[a] > LAYER[b] else "!!"
        print(f"{mark} {a:>15} -> {b:<15} {len(examples):>3} imports  e.g. {sorted(examples)[0]}")
    cycles = module_cycles(imports)
    print(f"import cycles: {len(cycles)}")
    for group in cycles:
        print("   " + " -> ".join(group))
    sys.exit(1 if cycles or any(LAYER[a] <= LAYER[b] for a, b in layer_edges(imports)) else 0)


def test_the_campaign_runtime_imports_no_torch():
    """Every MPI rank of a campaign imports the runtime; torch costs each of them seconds of start-up
    (and memory) although only trial processes train. The runtime's imports must stay torch-free."""
    import subprocess

    probe = ("import sys, scheduler.runtime.run, hydragnn_ensemble.cli.commands.hpo; "
             "print(sorted(m for m in ('torch', 'torch_geometric') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
