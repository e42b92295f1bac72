"""Find code in a submission that rebinds what the grader relies on (read outside the kernel).

The hidden tests run in the learner's kernel, after the learner's code, so a notebook could
disable a check by rebinding a function (``torch.isclose = ...``), by swallowing errors
(``get_ipython().set_custom_exc(...)``) or by editing ``sys.modules``.  This scan reads the
notebook's code cells with ``ast`` (no code is run) and returns one reason per finding; the
grading driver records them as flags in ``autograde/status/<id>.json`` and the grade export.
In-kernel, ``integrity.assert_untampered`` makes the hidden tests fail on the same rebinding.

What counts: assigning to (or deleting, or ``setattr`` on) an attribute of an imported module
or class when that attribute is a function, class or module of the library (setting a value
such as ``torch.backends.cudnn.benchmark = True`` is fine), also through ``sys.modules[...]``,
``importlib.import_module(...)`` or ``__import__(...)``; any assignment into ``course_utils``,
``builtins``/``__builtins__`` or ``sys.modules``; binding the name ``__builtins__``; replacing
the error display (``set_custom_exc``, ``sys.excepthook``, ``showtraceback``); touching the
kernel's cell hooks (``events``, input transformers) or the graded test cells' runner
(``test_room.py``); and defining a function or class under a builtin's name (harmless to the
graded tests, which use Python's own, but not what a learner's answer needs).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import types
from pathlib import Path

import nbformat

_ALWAYS = ("course_utils", "builtins", "nbgrader", "IPython", "ipykernel")
_ERROR_HOOKS = {
    "set_custom_exc",
    "excepthook",
    "showtraceback",
    "showsyntaxerror",
    "_showtraceback",
}
# The kernel's cell machinery the grader's hooks live in (cell_hooks.py, test_room.py).
_CELL_HOOKS = {
    "input_transformers_post",
    "input_transformers_cleanup",
    "input_transformer_manager",
    "ast_transformers",
    "user_ns",
    "user_global_ns",
}
# only on get_ipython()
_SHELL_ONLY = {
    "events",
    "run_cell",
    "run_ast_nodes",
    "run_code",
    "pre_run_cell",
}
_ROOM = "__course_test_room__"  # test_room.NAME (not imported: this scan runs outside any kernel)
_BUILTIN_NAMES = {n for n in dir(builtins) if not n.startswith("_")}


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
        except Exception:
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
        # inside a function or class: a local name, not the notebook's
        self.depth = 0

    # names bound by imports: `import torch as t`, `from torch import Tensor`
    def visit_Import(self, node: ast.Import):
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = (
                a.name if a.asname else a.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.module and node.level == 0:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _module_of(self, node: ast.AST) -> str | None:
        """``"math"`` for ``sys.modules["math"]``, ``importlib.import_module("math")`` or
        ``__import__("math")``; else None."""
        if (
            isinstance(node, ast.Subscript)
            and self._expand(_dotted(node.value) or "") == "sys.modules"
        ):
            key = node.slice
            return (
                key.value
                if isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                else "<computed>"
            )
        if isinstance(node, ast.Call) and node.args:
            fn = self._expand(_dotted(node.func) or "") or (
                _dotted(node.func) or ""
            )
            if fn in ("importlib.import_module", "__import__"):
                arg = node.args[0]
                return (
                    arg.value
                    if isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    else "<computed>"
                )
        return None

    def _target(self, node: ast.AST, how: str, line: int):
        if isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self._target(elt, how, line)
            return
        if isinstance(node, ast.Name):
            if node.id == "__builtins__":
                self.reasons.append(
                    f"line {line}: {how} __builtins__ (the builtins every name falls back to)"
                )
            elif node.id == _ROOM:
                self.reasons.append(
                    f"line {line}: {how} {_ROOM} (the grader's runner of test cells)"
                )
            return
        if isinstance(node, ast.Attribute) and (
            module := self._module_of(node.value)
        ):
            if module == "<computed>" or module.split(".")[0] in _ALWAYS:
                self.reasons.append(
                    f"line {line}: {how} an attribute of module {module} through sys.modules or an import call"
                )
            else:
                self._check(
                    module, node.attr, f"{module}.{node.attr}", how, line
                )
            return
        if isinstance(node, ast.Subscript):
            base = _dotted(node.value)
            full = self._expand(base) if base else None
            if full in ("sys.modules", "builtins.__dict__") or (
                base or ""
            ).endswith("__dict__"):
                self.reasons.append(f"line {line}: {how} {base}[...]")
            return
        if isinstance(node, ast.Attribute):
            base = _dotted(node.value)
            if base:
                self._check(
                    self._expand(base),
                    node.attr,
                    f"{base}.{node.attr}",
                    how,
                    line,
                )

    def _expand(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return dotted if head in ("sys",) else ""
        return f"{full}.{rest}" if rest else full

    def _check(self, owner: str, attr: str, shown: str, how: str, line: int):
        if not owner:
            if attr in _ERROR_HOOKS:
                self.reasons.append(
                    f"line {line}: {how} {shown} (replaces how errors are reported)"
                )
            return
        if attr in _ERROR_HOOKS or owner.split(".")[0] in _ALWAYS:
            self.reasons.append(f"line {line}: {how} {shown}")
            return
        original = _resolve(f"{owner}.{attr}")
        if (
            original is None
            and _resolve(owner) is not None
            and inspect.isclass(_resolve(owner))
        ):
            self.reasons.append(
                f"line {line}: {how} {shown} (adds to a library class)"
            )
        elif callable(original) or isinstance(original, types.ModuleType):
            self.reasons.append(
                f"line {line}: {how} {shown}, a function of the library"
            )

    def visit_Assign(self, node: ast.Assign):
        for t in node.targets:
            self._target(t, "assigns to", node.lineno)
        module = self._module_of(node.value)
        # m = sys.modules["math"]: m is math from now on
        if module and module != "<computed>":
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.aliases[t.id] = module
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        on_shell = (
            isinstance(node.value, ast.Call)
            and _dotted(node.value.func) == "get_ipython"
        )
        on_events = (
            isinstance(node.value, ast.Attribute)
            and node.value.attr == "events"
            and node.attr in ("register", "unregister", "callbacks")
        )
        if (
            node.attr in _CELL_HOOKS
            or on_events
            or (on_shell and node.attr in _SHELL_ONLY)
        ):
            self.reasons.append(
                f"line {node.lineno}: uses .{node.attr} (the kernel's cell machinery, "
                "where the grader's hooks live)"
            )
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        if node.id == _ROOM and isinstance(node.ctx, ast.Load):
            self.reasons.append(
                f"line {node.lineno}: uses {_ROOM} (the grader's runner of test cells)"
            )

    def _defines(self, name: str, line: int, what: str):
        if name in _BUILTIN_NAMES and self.depth == 0:
            self.reasons.append(
                f"line {line}: defines {what} {name}, a builtin's name (the graded tests use "
                f"Python's own {name})"
            )

    def visit_FunctionDef(self, node):
        self._defines(node.name, node.lineno, "a function")
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._defines(node.name, node.lineno, "a class")
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

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
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "set_custom_exc"
        ):
            fn = fn or "get_ipython().set_custom_exc"
            self.reasons.append(
                f"line {node.lineno}: calls {fn} (replaces how errors are reported)"
            )
        if (
            fn in ("setattr", "delattr")
            and node.args
            and (module := self._module_of(node.args[0]))
        ):
            name = (
                node.args[1].value
                if len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                else None
            )
            if (
                isinstance(name, str)
                and module != "<computed>"
                and module.split(".")[0] not in _ALWAYS
            ):
                self._check(
                    module,
                    name,
                    f"{module}.{name}",
                    f"calls {fn} on",
                    node.lineno,
                )
            else:
                self.reasons.append(
                    f"line {node.lineno}: calls {fn} on module {module} through sys.modules or an import call"
                )
        elif fn in ("setattr", "delattr") and node.args:
            base = _dotted(node.args[0])
            name = (
                node.args[1].value
                if len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                else "<computed>"
            )
            if base and self._expand(base):
                owner = self._expand(base)
                if isinstance(name, str) and name != "<computed>":
                    self._check(
                        owner,
                        name,
                        f"{base}.{name}",
                        f"calls {fn} on",
                        node.lineno,
                    )
                else:
                    self.reasons.append(
                        f"line {node.lineno}: calls {fn}({base}, <computed name>)"
                    )
        self.generic_visit(node)


def scan_source(source: str) -> list[str]:
    """Reasons (``"line 3: assigns to torch.isclose, a function of the library"``) for one code string."""
    # IPython magics and shell escapes are not Python: blank them so the rest still parses.
    lines = [
        "" if ln.lstrip().startswith(("%", "!")) else ln
        for ln in source.splitlines()
    ]
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
    imports = "\n".join(
        ln
        for c in nb.cells
        if c.cell_type == "code"
        for ln in c.source.splitlines()
        if ln.lstrip().startswith(("import ", "from "))
        and not ln.startswith((" ", "\t"))
    )
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        # Each cell is read with every top-level import of the notebook, so aliases carry over.
        offset = imports.count("\n") + 1 if imports else 0
        for reason in scan_source(
            imports + "\n" + cell.source if imports else cell.source
        ):
            head, _, rest = reason.partition(": ")
            line = (
                int(head.split()[1]) - offset
                if head.startswith("line ")
                else 0
            )
            if line > 0:
                out.append(f"cell {number}, line {line}: {rest}")
    return out
