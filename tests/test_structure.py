"""Issue 17, items 2–3: no import cycle, small modules, no defense name outside ``defenses/``, ``python -m``."""

import ast
import pathlib
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "reconguard"


def _modules() -> dict:
    mods = {}
    for f in SRC.rglob("*.py"):
        parts = list(f.relative_to(SRC.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return mods


def _import_graph() -> dict:
    """Module → the reconguard modules it imports, counting imports inside functions too (a cycle that only
    a function-level import hides is still a cycle in the design)."""
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, (f, is_pkg) in mods.items():
        pkg = m if is_pkg else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            edges[m].update(c for c in found if c in mods and c != m)
    return edges


def _cycles(edges: dict) -> list:
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_400_lines():
    long = {str(f.relative_to(SRC)): n for f in SRC.rglob("*.py") if (n := len(f.read_text().splitlines())) > 400}
    assert not long, f"modules over 400 lines: {long}"


def _string_constants(tree):
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_no_defense_name_outside_defenses():
    from reconguard.defenses.registry import DEFENSES

    hits = []
    for f in SRC.rglob("*.py"):
        if "defenses" in f.relative_to(SRC).parts:
            continue
        for node in _string_constants(ast.parse(f.read_text())):
            if node.value in DEFENSES:
                hits.append(f"{f.relative_to(SRC)}:{node.lineno} {node.value!r}")
    assert not hits, "defense names outside defenses/ (use the registry or the defense's attributes): " + ", ".join(hits)


def test_a_defense_is_one_file_and_one_registry_line(monkeypatch):
    """A throwaway defense: a Defense subclass plus one registry entry is all the CLI and the recipes need."""
    from reconguard.cli import build_parser
    from reconguard.defenses import registry
    from reconguard.defenses.base import Defense

    class LabelNoise(Defense):
        options = {"rate": "LabelNoise: fraction of labels replaced"}

        def __init__(self, rate: float = 0.1):
            self.rate = rate

    monkeypatch.setitem(registry.DEFENSES, "label-noise", (LabelNoise, {}))
    args = build_parser().parse_args(["train", "--defense", "label-noise", "--rate", "0.3"])
    from reconguard.cli.mia import _defense_options
    assert _defense_options(args) == {"rate": 0.3}
    assert registry.make_defense("label-noise", {"rate": 0.3}).rate == 0.3


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["instahide", "attack", "--help"]])
def test_python_dash_m_reconguard(argv):
    out = subprocess.run([sys.executable, "-m", "reconguard", *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "usage: reconguard" in out.stdout


def test_lpips_heads_found_through_package_data_or_a_clear_error(tmp_path, monkeypatch):
    from reconguard.errors import DataFileNotFoundError
    from reconguard.metrics import lpips as lp

    found = lp.lpips_heads_path()
    assert found.is_file() and found.name == "vgg.pth"
    assert lp.lpips_heads_path(found) == found
    with pytest.raises(DataFileNotFoundError, match="vgg.pth.*heads="):
        lp.lpips_heads_path(tmp_path / "missing.pth")
    monkeypatch.setattr(lp, "HEADS_PACKAGE", "reconguard.no_such_package")
    with pytest.raises(DataFileNotFoundError, match="lpips_models/vgg.pth"):
        lp.LPIPS()


def test_no_function_over_80_lines_in_attacks_and_experiments():
    """Issue 33: every function (and method) in ``attacks/`` and ``experiments/`` fits on a screen."""
    root = pathlib.Path(__file__).resolve().parents[1] / "src" / "reconguard"
    long = []
    for folder in ("attacks", "experiments"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 80:
                        long.append(f"{path.relative_to(root)}:{node.name} ({lines} lines)")
    assert not long, long
