"""The package's layers, read from the source: no import circles, and no module imports a
layer above its own. `python tests/unit/test_layers.py` prints the circles and the upward imports
it finds (`import_circles=0 upward_imports=0` when the house is in order).

Every import counts, a function-local one too: a local import can hide a circle from Python
at import time, but not from a reader. An import under `if TYPE_CHECKING:` counts as well:
it never runs, but a reader and a type checker follow it, so a circle closed there is still
a circle. Importing `a.b.c` also runs `a/b/__init__.py`, so it counts as an import of that
package, unless the package encloses the importer.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "hpo").is_dir():     # wherever this file sits under tests/
    ROOT = ROOT.parent

# Lowest first. A module may import its own layer and those below it, never one above.
LAYERS = [
    ("foundation", ["hpo.registry", "hpo.errors", "hpo.trial", "hpo.space", "hpo.metric_names",
                    "hpo.references", "hpo.jobs", "hpo.native_logs", "hpo.clock", "hpo.termination"]),
    ("search models", ["hpo.search.base", "hpo.search.schedule", "hpo.search.surrogates",
                       "hpo.search.multiobjective"]),
    ("searchers", ["hpo.search"]),
    ("data and models", ["hpo.data", "hpo.models"]),
    ("experiment", ["hpo.config"]),
    ("study and logs", ["hpo.study"]),
    ("training", ["hpo.training"]),
    ("fusion", ["hpo.fusion"]),
    ("executors", ["hpo.executors"]),
    ("driver", ["hpo.driver"]),
    ("library", ["hpo.objective", "hpo.tuner", "hpo.keras_tuner"]),
    ("command line", ["hpo.cli", "hpo", "hpo.__main__"]),
]


def module_names() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "hpo").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def imports_of(name: str, path: Path, known: dict[str, Path], type_level: bool = True) -> list[tuple[str, int]]:
    """(module imported, line) for every hpo import in the file: those that can run, and
    with `type_level` those under `if TYPE_CHECKING:` too."""
    found: list[tuple[str, int]] = []
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child) and not type_level:
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[:len(package) - child.level + 1] + ([base] if base else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append((full if full in known else base, child.lineno))
            visit(child)

    visit(ast.parse(path.read_text()))
    edges = [(target, line) for target, line in found if target in known and target != name]
    for target, line in list(edges):
        enclosing = target.rpartition(".")[0]
        if enclosing not in ("", "hpo") and not (name + ".").startswith(enclosing + "."):
            edges.append((enclosing, line))
    return edges


def import_graph(type_level: bool = True) -> dict[str, list[tuple[str, int]]]:
    known = module_names()
    return {name: imports_of(name, path, known, type_level) for name, path in known.items()}


def circles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def layer_of(module: str) -> int | None:
    """The layer whose most specific prefix names `module`."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def upward_imports(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    out = []
    for module, edges in sorted(graph.items()):
        for target, line in edges:
            if layer_of(target) > layer_of(module):
                out.append(f"{module}:{line} ({LAYERS[layer_of(module)][0]}) imports {target} "
                           f"({LAYERS[layer_of(target)][0]})")
    return out


def test_the_package_has_no_import_circles():
    found = circles(import_graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_every_module_belongs_to_a_layer():
    assert [m for m in module_names() if layer_of(m) is None] == []


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports(import_graph()) == []


def test_the_runner_imports_no_module_of_training():
    """The runner sees training only through the ground floor's contract (`hpo.jobs`, and
    `hpo.metric_names` for comparing epochs and naming model measures), so that what the
    trainer does inside can change without the driver noticing."""
    graph = import_graph()
    assert graph["hpo.driver.runner"], "the check found no import of the runner at all"
    assert [target for target, _ in graph["hpo.driver.runner"]
            if target == "hpo.training" or target.startswith("hpo.training.")] == []


def test_the_checker_sees_a_circle_closed_by_a_function_local_import(tmp_path, monkeypatch):
    """The checks above would pass vacuously if the reader missed imports; a made-up package
    with a circle closed inside a function, and an upward import, must be caught."""
    package = tmp_path / "hpo"
    (package / "search").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "registry.py").write_text("def names():\n    from hpo.search import base\n    return base\n")
    (package / "search" / "__init__.py").write_text("from hpo.search.base import X\n")
    (package / "search" / "base.py").write_text("from hpo.registry import names\nX = 1\n")
    (package / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from hpo.search import base\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    graph = import_graph()
    assert circles(graph) == [["hpo.registry", "hpo.search", "hpo.search.base"]]
    assert upward_imports({k: v for k, v in graph.items() if k != "hpo.typed"}) == [
        "hpo.registry:2 (foundation) imports hpo.search.base (search models)",
        "hpo.registry:2 (foundation) imports hpo.search (searchers)"]
    # An import only a type checker follows counts too; the graph of what runs leaves it out.
    assert graph["hpo.typed"] == [("hpo.search.base", 3), ("hpo.search", 3)]
    assert import_graph(type_level=False)["hpo.typed"] == []


if __name__ == "__main__":
    graph = import_graph()
    found, upward = circles(graph), upward_imports(graph)
    for group in found:
        print("circle:", " <-> ".join(group))
    for line in upward:
        print("upward:", line)
    print(f"import_circles={len(found)} upward_imports={len(upward)}")


def _reads_of_the_trainer(path: Path) -> set[str]:
    """Attributes read of anything called `trainer` (`trainer.x`, `self.trainer.x`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "trainer") or \
                    (isinstance(owner, ast.Attribute) and owner.attr == "trainer"):
                names.add(node.attr)
    return names


def test_fusion_uses_the_trainer_through_its_declared_seam_only():
    """`hpo.training.seam.TrainerSeam` is what fused trials may use of a trainer; the trainer
    provides all of it."""
    from hpo.training.seam import SEAM_MEMBERS

    read = set().union(*(_reads_of_the_trainer(p) for p in (ROOT / "hpo" / "fusion").glob("*.py")))
    assert read, "the check found no use of the trainer at all"
    assert read <= SEAM_MEMBERS, f"fusion reads trainer members outside the seam: {sorted(read - SEAM_MEMBERS)}"
    trainer_source = (ROOT / "hpo" / "training" / "trainer.py").read_text()
    provided = {n.attr for n in ast.walk(ast.parse(trainer_source))
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                and isinstance(n.ctx, ast.Store)}
    provided |= {n.name for n in ast.walk(ast.parse(trainer_source)) if isinstance(n, ast.FunctionDef)}
    assert SEAM_MEMBERS <= provided, f"the trainer lacks {sorted(SEAM_MEMBERS - provided)}"
