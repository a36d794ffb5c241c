"""The shape of the house, checked: no import cycle (imports inside functions count), engine settings named
only inside kvcalc/engines/, no kvcalc flag written by the library, no long function without a reason."""

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "kvcalc"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every kvcalc module ``name`` imports, at any depth of the file (functions included)."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "kvcalc"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("kvcalc"):
                continue
            for a in node.names:  # `from . import x` names a submodule when there is one
                out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    return {m for m in out if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_no_import_cycle_counting_imports_inside_functions():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_would_catch_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    # and it sees imports inside functions: the HF importer must not reach back into the loader
    graph = _graph()
    assert "kvcalc.config.loader" not in set().union(*(graph[m] for m in graph if m.startswith("kvcalc.config.hf")))


#: engine settings and backends: named only inside kvcalc/engines/
ENGINE_WORDS = re.compile(r"batched_tokens|batched tokens|memory_utilization|async_scheduling|async scheduling|"
                          r"gdn_prefill|GDN prefill|mamba_cache_mode|prefix_caching|indexer_dtype", re.I)


def _outside_engines():
    for name, path in _modules().items():
        if not name.startswith("kvcalc.engines"):
            yield name, path


def test_no_module_outside_engines_names_an_engine_setting():
    hits = []
    for name, path in _outside_engines():
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if ENGINE_WORDS.search(line):
                hits.append(f"{name}:{no}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_engine_word_scan_would_catch_one():
    assert ENGINE_WORDS.search('chunk = p.settings.get("max_num_batched_tokens", 8192)')
    assert ENGINE_WORDS.search("x {gpu_memory_utilization:g} utilisation")


def _kvcalc_flags() -> set[str]:
    from kvcalc.present.flags import FLAGS

    return {f for f in FLAGS.values() if f.startswith("--")}


def _strings(tree):
    """String constants that are not docstrings, nor arguments of an engine's Option(...) declaration."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Option":
            skip |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node


#: kvcalc.engines.llamacpp.launch renders llama-server's own command line, whose flags share names with kvcalc's
#: llama.cpp settings (--kv-unified, --swa-full, ...): they are llama-server's words there, not kvcalc's
LIBRARY_EXEMPT = ("kvcalc.cli", "kvcalc.present", "kvcalc.engines.llamacpp.launch")


def test_the_library_never_writes_a_kvcalc_flag():
    flags = _kvcalc_flags()
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in sorted(flags, key=len, reverse=True))
                         + r")(?![\w-])")
    hits = []
    for name, path in _modules().items():
        if name.startswith(LIBRARY_EXEMPT):
            continue
        for node in _strings(ast.parse(path.read_text())):
            m = pattern.search(node.value)
            if m:
                hits.append(f"{name}:{node.lineno}: {m.group(1)} in {node.value[:80]!r}")
    assert not hits, "\n".join(hits)


MAX_LINES = 80


def test_no_long_function_without_a_reason():
    long = []
    for name, path in _modules().items():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                body = "\n".join(lines[node.lineno - 1:node.end_lineno])
                if n > MAX_LINES and "# one piece:" not in body:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert not long, long


@pytest.mark.parametrize("module", ["kvcalc.estimate", "kvcalc.plan", "kvcalc.capacity", "kvcalc.checklog"])
def test_the_library_returns_data_not_text(module):
    import importlib

    mod = importlib.import_module(module)
    assert not [n for n in dir(mod) if n.startswith("render")]
    from kvcalc.estimate import Estimate

    assert not hasattr(Estimate, "formats_text") and not hasattr(Estimate, "basis_text")


def test_the_wheel_ships_every_package():
    """pyproject discovers its packages (setuptools' find with its include patterns): every package folder under
    kvcalc/ and kvcalc_kernels/ is found, so a new engine's folder ships without a list to edit."""
    import tomllib

    from setuptools import find_packages

    root = PKG.parent
    include = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_packages(str(root), include=include))
    found = {".".join(p.relative_to(root).parts[:-1]) for top in ("kvcalc", "kvcalc_kernels")
             for p in (root / top).rglob("__init__.py")}
    assert found and found == shipped, sorted(found ^ shipped)
