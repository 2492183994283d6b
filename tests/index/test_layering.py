"""The packages stay layered: no import cycles between modules, and each layer imports only those below.

Layers, bottom up: ``lattice`` <- ``index`` <- ``greedy`` <- the ``polydom`` face (every module of
``polydom/`` outside the four internal packages); ``featurizers`` stands apart from the lattice,
the index and Greedy. Imports are read from the source with :mod:`ast`, every one of them --
module level or inside a function, since a lazy import still runs and still closes a cycle.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Repository folder -> the package it installs as (see pyproject.toml).
FOLDERS = {
    "polydom": "polydom", "lattice": "polydom.lattice", "index": "polydom.index",
    "greedy": "polydom.greedy", "featurizers": "polydom.featurizers",
}
INTERNAL = ("polydom.lattice", "polydom.index", "polydom.greedy", "polydom.featurizers")


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's ``__init__``)."""
    out = {}
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).parent.parts)
            if folder == "polydom" and parts and parts[0] in FOLDERS:
                continue  # a stray folder named like a layer is not the layer
            if "__pycache__" in parts:
                continue
            name = ".".join([package, *parts] + ([] if path.name == "__init__.py" else [path.stem]))
            out[name] = (path, path.name == "__init__.py")
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The polydom modules ``name`` imports anywhere in its source."""
    path, is_package = MODULES[name]
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                # ``from package import module`` imports that module
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source)
    return {m for m in found if m in MODULES}


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1 or v in GRAPH[v]:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def _layer(module: str) -> str:
    for package in INTERNAL:
        if module == package or module.startswith(package + "."):
            return package
    return "polydom"


#: What each layer may import from polydom, besides itself.
ALLOWED = {
    "polydom.lattice": set(),
    "polydom.index": {"polydom.lattice", "polydom.featurizers"},
    "polydom.greedy": {"polydom.index", "polydom.lattice"},
    "polydom.featurizers": {"polydom"},
    "polydom": set(INTERNAL),
}


#: The root of the exceptions and warnings: every layer may derive from it (it imports nothing).
SHARED_BASE = "polydom.lattice.errors"


def _violations(layer: str) -> list[str]:
    allowed = ALLOWED[layer] | {layer}
    return sorted(
        f"{source} imports {target}"
        for source in GRAPH if _layer(source) == layer
        for target in GRAPH[source] if _layer(target) not in allowed and target != SHARED_BASE
    )


def test_the_shared_base_imports_nothing():
    assert GRAPH[SHARED_BASE] == set()


def _cycles_through(layer: str) -> list[list[str]]:
    return [c for c in _cycles() if any(_layer(m) == layer for m in c)]


# Known problems outside the storage layer, each with what fixes it.
_KNOWN_CYCLES: dict[str, str] = {}


@pytest.mark.parametrize("layer", [
    pytest.param(layer, marks=[pytest.mark.xfail(reason=_KNOWN_CYCLES[layer])] if layer in _KNOWN_CYCLES else [])
    for layer in ALLOWED
])
def test_no_import_cycles(layer):
    assert _cycles_through(layer) == []


@pytest.mark.parametrize("layer", list(ALLOWED))
def test_each_layer_imports_only_the_layers_below(layer):
    assert _violations(layer) == []


def test_the_graph_sees_lazy_and_relative_imports():
    assert "polydom.index.store" in GRAPH["polydom.index.base"]  # imported inside StoredIndex.save
    assert "polydom.index.storage.records" in GRAPH["polydom.index.storage.reader"]
    assert "polydom.index.storage.modelcodec" in GRAPH["polydom.cache"]


STORAGE = [m for m in MODULES if m.startswith("polydom.index.storage")]
#: The only modules outside itself the storage layer may import: it resolves index classes
#: through the backend registry and knows indexes only as an IndexState.
STORAGE_MAY_IMPORT = {"polydom.index.errors", "polydom.index.state", SHARED_BASE}


def test_storage_is_in_no_cycle_and_never_imports_the_algorithm():
    assert STORAGE and all(m not in c for c in _cycles() for m in STORAGE)
    outside = {
        f"{m} imports {t}" for m in STORAGE for t in GRAPH[m]
        if not t.startswith("polydom.index.storage") and t not in STORAGE_MAY_IMPORT
    }
    assert outside == set()
    for bottom in STORAGE_MAY_IMPORT:
        assert GRAPH[bottom] <= {SHARED_BASE}, f"{bottom} must stay dependency-free"


@pytest.mark.parametrize("entry", ["polydom.index.store", "polydom.index.base"])
def test_the_entry_points_reach_storage_without_a_cycle(entry):
    assert all(entry not in c for c in _cycles())
