"""The import graph of the packages, built from their source: no cycles, and no import against the
layering.

Layers, bottom up: ``mmvref`` <- ``npu`` <- ``conformance``; ``benchmarks`` and ``tools`` on top
(nothing below imports them, nor ``tests``). Every import statement counts, at module level or
inside a function (a lazy import is still a dependency: it runs the first time the function is
called, and a cycle through it is a cycle). ``from pkg import name`` is an edge to ``pkg.name``
when that is a module, else to ``pkg``; the implicit import of a module's parent packages is not
an edge. (The kernel modules ``mmvref._fast._target.kernels`` loads by name are reached one way,
from the dispatch, and do not show here.)
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: layer of each top-level package: an import may only go to the same layer or a lower one
LAYERS = {"mmvref": 0, "npu": 1, "conformance": 2, "benchmarks": 3, "tools": 3, "tests": 4}
CHECKED = ("mmvref", "npu", "conformance")


def modules(root: Path, packages) -> dict[str, Path]:
    """{dotted module name: source file} of every .py file under the packages."""
    out = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _resolve(name: str, mods) -> str | None:
    """The module of ``mods`` that ``name`` (a module or an attribute of one) lives in."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, packages=CHECKED, targets=tuple(LAYERS)):
    """{module: {imported module: line}} for the modules of ``packages``; imported modules are those
    of ``targets`` (third-party imports are not edges)."""
    mods = modules(root, packages)
    known = modules(root, [t for t in targets if (root / t).is_dir()])
    graph = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                names = [f"{src}.{a.name}" if f"{src}.{a.name}" in known else src for a in node.names]
            else:
                continue
            for n in names:
                t = _resolve(n, known)
                if t and t != mod:
                    edges.setdefault(t, node.lineno)
        graph[mod] = edges
    return graph


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def upward(graph) -> list[str]:
    """Imports from a module to a higher layer (``LAYERS``), as 'a -> b (line n)'."""
    out = []
    for a, edges in graph.items():
        for b, line in edges.items():
            if LAYERS[b.split(".")[0]] > LAYERS[a.split(".")[0]]:
                out.append(f"{a} -> {b} (line {line})")
    return out


def _describe(graph, comp):
    return "\n".join(f"  {a} -> {b} (line {line})" for a in comp for b, line in graph[a].items() if b in comp)


def test_no_import_cycles():
    graph = import_graph(ROOT)
    assert len(graph) > 100, f"only {len(graph)} modules found under {ROOT}: the walk is broken"
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(f"{c}:\n{_describe(graph, c)}" for c in found)


def test_no_import_against_the_layering():
    bad = upward(import_graph(ROOT))
    assert not bad, "imports against mmvref <- npu <- conformance <- benchmarks/tools:\n  " + "\n  ".join(bad)


def test_mmvref_imports_without_torch():
    import subprocess
    import sys

    code = "import sys, mmvref; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert r.stdout.strip() == "False", "import mmvref imported torch"


# ----------------------------------------------------------------------------- the checker itself

def _package(tmp_path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


@pytest.mark.parametrize("body_a, body_b", [
    ("from . import b\n", "from . import a\n"),  # module level
    ("def f():\n    from .b import g\n", "from .a import f\n"),  # a lazy import closes the cycle
    ("import mmvref.b\n", "from mmvref import a as x\n"),  # absolute forms
])
def test_checker_finds_a_cycle(tmp_path, body_a, body_b):
    root = _package(tmp_path, {"mmvref/__init__.py": "", "mmvref/a.py": body_a, "mmvref/b.py": body_b})
    assert cycles(import_graph(root, ("mmvref",))) == [["mmvref.a", "mmvref.b"]]


def test_checker_finds_an_upward_import_and_accepts_a_downward_one(tmp_path):
    root = _package(tmp_path, {
        "mmvref/__init__.py": "", "mmvref/x.py": "def f():\n    from conformance import runner\n",
        "npu/__init__.py": "from mmvref import x\n",
        "conformance/__init__.py": "", "conformance/runner.py": "import npu\n"})
    graph = import_graph(root, ("mmvref", "npu", "conformance"))
    assert upward(graph) == ["mmvref.x -> conformance.runner (line 2)"]
    assert cycles(graph) == [["conformance.runner", "mmvref.x", "npu"]]  # the upward edge closes one too
    del graph["mmvref.x"]["conformance.runner"]
    assert upward(graph) == [] and cycles(graph) == []
