"""Find code in a submission that rebinds what the grader relies on (read outside the kernel).

The hidden tests run in the learner's kernel, after the learner's code, so a notebook could
disable a check by rebinding a function (``torch.isclose = ...``), by swallowing errors
(``get_ipython().set_custom_exc(...)``) or by editing ``sys.modules``.  This scan reads the
notebook's code cells with ``ast`` (no code is run) and returns one reason per finding; the
grading driver records them as flags in ``autograde/status/<id>.json`` and the grade export.
In-kernel, ``integrity.assert_untampered`` makes the hidden tests fail on the same rebinding.

What counts: assigning to (or deleting, or ``setattr`` on) an attribute of an imported module
or class when that attribute is a function, class or module of the library (setting a value
such as ``torch.backends.cudnn.benchmark = True`` is fine), any assignment into
``course_utils``, ``builtins``/``__builtins__`` or ``sys.modules``, and replacing the error
display (``set_custom_exc``, ``sys.excepthook``, ``showtraceback``).
"""
from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path

import nbformat

_ALWAYS = ("course_utils", "builtins", "nbgrader", "IPython", "ipykernel")
_ERROR_HOOKS = {"set_custom_exc", "excepthook", "showtraceback", "showsyntaxerror", "_showtraceback"}


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of Name/Attribute nodes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _resolve(path: str):
    """The object at dotted ``path`` in the grader's own Python, or None if it does not exist."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - not a module: try a shorter prefix
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self):
        self.aliases: dict[str, str] = {"__builtins__": "builtins"}
        self.reasons: list[str] = []

    # names bound by imports: `import torch as t`, `from torch import Tensor`
    def visit_Import(self, node: ast.Import):
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.module and node.level == 0:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _target(self, node: ast.AST, how: str, line: int):
        if isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self._target(elt, how, line)
            return
        if isinstance(node, ast.Subscript):
            base = _dotted(node.value)
            full = self._expand(base) if base else None
            if full in ("sys.modules", "builtins.__dict__") or (base or "").endswith("__dict__"):
                self.reasons.append(f"line {line}: {how} {base}[...]")
            return
        if isinstance(node, ast.Attribute):
            base = _dotted(node.value)
            if base:
                self._check(self._expand(base), node.attr, f"{base}.{node.attr}", how, line)

    def _expand(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return dotted if head in ("sys",) else ""
        return f"{full}.{rest}" if rest else full

    def _check(self, owner: str, attr: str, shown: str, how: str, line: int):
        if not owner:
            if attr in _ERROR_HOOKS:
                self.reasons.append(f"line {line}: {how} {shown} (replaces how errors are reported)")
            return
        if attr in _ERROR_HOOKS or owner.split(".")[0] in _ALWAYS:
            self.reasons.append(f"line {line}: {how} {shown}")
            return
        original = _resolve(f"{owner}.{attr}")
        if original is None and _resolve(owner) is not None and inspect.isclass(_resolve(owner)):
            self.reasons.append(f"line {line}: {how} {shown} (adds to a library class)")
        elif callable(original) or isinstance(original, types.ModuleType):
            self.reasons.append(f"line {line}: {how} {shown}, a function of the library")

    def visit_Assign(self, node: ast.Assign):
        for t in node.targets:
            self._target(t, "assigns to", node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign):
        self._target(node.target, "assigns to", node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign):
        self._target(node.target, "assigns to", node.lineno)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete):
        for t in node.targets:
            self._target(t, "deletes", node.lineno)

    def visit_Call(self, node: ast.Call):
        fn = _dotted(node.func) or ""
        if isinstance(node.func, ast.Attribute) and node.func.attr == "set_custom_exc":
            fn = fn or "get_ipython().set_custom_exc"
            self.reasons.append(f"line {node.lineno}: calls {fn} (replaces how errors are reported)")
        if fn in ("setattr", "delattr") and node.args:
            base = _dotted(node.args[0])
            name = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else "<computed>"
            if base and self._expand(base):
                owner = self._expand(base)
                if isinstance(name, str) and name != "<computed>":
                    self._check(owner, name, f"{base}.{name}", f"calls {fn} on", node.lineno)
                else:
                    self.reasons.append(f"line {node.lineno}: calls {fn}({base}, <computed name>)")
        self.generic_visit(node)


def scan_source(source: str) -> list[str]:
    """Reasons (``"line 3: assigns to torch.isclose, a function of the library"``) for one code string."""
    # IPython magics and shell escapes are not Python: blank them so the rest still parses.
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    scanner = _Scanner()
    scanner.visit(tree)
    return scanner.reasons


def scan_notebook(path: str | Path) -> list[str]:
    """Every finding in the code cells of the notebook at ``path``, prefixed with its cell number."""
    nb = nbformat.read(str(path), as_version=4)
    out = []
    imports = "\n".join(ln for c in nb.cells if c.cell_type == "code" for ln in c.source.splitlines()
                        if ln.lstrip().startswith(("import ", "from ")) and not ln.startswith((" ", "\t")))
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        # Each cell is read with every top-level import of the notebook, so aliases carry over.
        offset = imports.count("\n") + 1 if imports else 0
        for reason in scan_source(imports + "\n" + cell.source if imports else cell.source):
            head, _, rest = reason.partition(": ")
            line = int(head.split()[1]) - offset if head.startswith("line ") else 0
            if line > 0:
                out.append(f"cell {number}, line {line}: {rest}")
    return out
