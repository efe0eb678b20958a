"""The package layout stays readable: no import cycles (imports inside functions included), a
handful of root modules, and the layers of docs/architecture.md (the trace package imports no
analysis, importers import no collector, collectors do not import each other)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "scalestack"


def _modules(base: Path, prefix: str) -> dict[str, Path]:
    mods = {}
    for p in base.rglob("*.py"):
        parts = list(p.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join([prefix, *parts]) if prefix else ".".join(parts)] = p
    return mods


def _imports(path: Path, module: str, is_package: bool) -> set[str]:
    """Every module name imported anywhere in the file (top level, functions, TYPE_CHECKING blocks)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
    return names


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, p in mods.items():
        targets = {resolve(n) for n in _imports(p, m, p.name == "__init__.py")}
        # a submodule importing its own package (or an ancestor's __init__) is not a cycle
        graph[m] = {t for t in targets if t and t != m and not m.startswith(t + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    graph = _graph(_modules(PKG, "scalestack"))
    assert len(graph) > 50
    assert _cycles(graph) == []


def test_no_import_cycle_among_benchmarks():
    mods = {p.stem: p for p in (ROOT / "benchmarks").rglob("*.py")}
    graph = {m: {n for n in _imports(p, m, False) if n in mods and n != m} for m, p in mods.items()}
    assert _cycles(graph) == []


def test_at_most_six_root_modules():
    assert len(list(PKG.glob("*.py"))) <= 6, sorted(p.name for p in PKG.glob("*.py"))


def _imported_packages(prefix: str) -> dict[str, set[str]]:
    mods = _modules(PKG, "scalestack")
    graph = _graph(mods)
    return {m: targets for m, targets in graph.items() if m == prefix or m.startswith(prefix + ".")}


def test_layers():
    def uses(prefix: str, forbidden: tuple[str, ...]) -> list[str]:
        return sorted(f"{m} -> {t}" for m, ts in _imported_packages(prefix).items() for t in ts
                      if any(t == f or t.startswith(f + ".") for f in forbidden))

    assert uses("scalestack.trace", ("scalestack.analysis", "scalestack.report", "scalestack.commands",
                                     "scalestack.collect", "scalestack.ingest")) == []
    assert uses("scalestack.ingest", ("scalestack.collect", "scalestack.analysis", "scalestack.report")) == []
    assert uses("scalestack.analysis", ("scalestack.commands", "scalestack.collect")) == []
    collectors = ("perf", "ebpf", "tracefs", "aggregator")
    for c in collectors:
        others = tuple(f"scalestack.collect.{o}" for o in collectors if o != c)
        assert uses(f"scalestack.collect.{c}", others) == []


def test_every_benchmark_says_what_it_prints_and_has_a_quick_mode():
    for kind in ("speed", "validation"):
        scripts = [p for p in (ROOT / "benchmarks" / kind).glob("*.py") if p.name != "paired_runs.py"]
        assert scripts
        for p in scripts:
            doc = ast.get_docstring(ast.parse(p.read_text()))
            assert doc and doc.splitlines()[0].strip(), p
            assert re.search(r"add_argument\(\s*\"--quick\"", p.read_text()) or "--quick" in p.read_text(), p
