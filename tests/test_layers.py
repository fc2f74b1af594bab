"""The folders form layers (swflow/core/layers.py, drawn in docs/architecture.md): every import, inside functions
too, points to the importer's own layer or one below; no module import cycle; modules and functions stay small."""
import ast
import re
from pathlib import Path

import pytest

from swflow.core.layers import LAYERS, layer_of

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("swflow", "autoencoders")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def _files() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


FILES = _files()


def _imports(module: str, path: Path) -> set[str]:
    """The modules of swflow and autoencoders that ``module`` imports, anywhere in its code."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in FILES else base for alias in node.names]
        else:
            continue
        out.update(t for t in targets if t.split(".")[0] in PACKAGES)
    return out


GRAPH = {module: _imports(module, path) for module, path in FILES.items()}


def test_the_layers_cover_every_module():
    outside = sorted(m for m in FILES if layer_of(m) == len(LAYERS))
    assert not outside, f"modules in no layer of swflow/core/layers.py: {outside}"


def test_every_import_points_down_the_layers():
    upward = sorted(f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
                    for a, targets in GRAPH.items() for b in targets if layer_of(b) > layer_of(a))
    assert not upward, "imports that climb:\n" + "\n".join(upward)


def test_no_two_folders_import_each_other():
    def folder(module):
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == "swflow" and len(parts) >= 2 else parts[0]

    edges = {(folder(a), folder(b)) for a, targets in GRAPH.items() for b in targets if folder(a) != folder(b)}
    mutual = sorted({tuple(sorted(e)) for e in edges if e[::-1] in edges})
    assert not mutual, f"folders that import each other: {mutual}"


def test_no_module_import_cycle():
    state, stack, cycles = {}, [], []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in GRAPH.get(module, ()):
            if target not in FILES or target == module:
                continue
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(FILES):
        if module not in state:
            visit(module)
    # a package's __init__ that re-exports its own modules is not a cycle of code
    real = [c for c in cycles if not any(c[i + 1].startswith(c[i] + ".") for i in range(len(c) - 1))]
    assert not real, f"import cycles: {real}"


@pytest.mark.parametrize("module", sorted(FILES))
def test_modules_and_functions_stay_small(module):
    source = FILES[module].read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{module} has more than {MAX_MODULE_LINES} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{module}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_architecture_page_draws_the_layers_in_their_order():
    page = (ROOT / "docs" / "architecture.md").read_text()
    drawing = page[page.index("## Layers"):]
    drawing = drawing[drawing.index("```") + 3:]
    drawing = drawing[:drawing.index("```")]
    drawn = [m.group(1) for m in re.finditer(r"^\s*(\w+)/", drawing, re.M)]
    assert drawn == [name for name, _ in reversed(LAYERS)], drawn


def test_the_wheel_lists_every_package():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for package in PACKAGES
             for p in (ROOT / package).rglob("__init__.py")}
    assert found <= listed, f"packages the wheel would leave out: {sorted(found - listed)}"
