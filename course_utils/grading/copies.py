"""The course's own answers, recognised up to names and formatting.

The reader's edition is public: its pages show every solution, and ``course_utils/references``
holds the course's implementation of every graded function.  Two uses of one comparison:

* grading flags a submission whose graded function or class *is* one of those answers with
  other names and layout (``copied_answers``): a flag for the instructor to look at, never a
  change of score, since an honest answer to a small exercise can coincide with the course's;
* the class edition must hold no answer at all (``answers_in``): every function and class
  definition of every file in it is compared with the answers.

What "the same" means: the ``ast`` of the definition, with its docstrings and decorators
dropped and every name a learner chooses (arguments, local variables, the names of inner
functions and of module aliases such as ``F`` or ``nn``; not Python's builtins) replaced by its
order of first appearance.  Attribute names (``.softmax``, ``.masked_fill``), constants,
operators and the shape of the code stay.  Comments, blank lines, line breaks and quotes are
gone with the source text.  Definitions smaller than ``MIN_NODES`` nodes are never compared: a
one-line answer can only be written a few ways, so agreeing with the course says nothing there.
"""

from __future__ import annotations

import ast
import builtins
import copy
import re
from pathlib import Path

# Smaller definitions are never compared: chapter 01's three-line softmax is what most learners
# write unaided; its additive attention is already their own way or a copy.
MIN_NODES = 80
_BUILTINS = set(dir(builtins))


class _Canonical(ast.NodeTransformer):
    """Names replaced by their order of first appearance; docstrings and annotations dropped."""

    def __init__(self):
        self.names: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        return self.names.setdefault(name, f"_{len(self.names)}")

    def _body(self, node):
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:] or [ast.Pass()]
        node.body = body
        return node

    def visit_FunctionDef(self, node):
        node = self._body(node)
        node.returns = None
        node.decorator_list = []  # @torch.no_grad() and the like: left out by a copy as often as not
        node.args = self.visit(node.args)
        node.body = [self.visit(s) for s in node.body]
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node = self._body(node)
        node.decorator_list = []
        node.bases = [self.visit(b) for b in node.bases]
        node.body = [self.visit(s) for s in node.body]
        return node

    def visit_arg(self, node):
        node.arg = self._rename(node.arg)
        node.annotation = None
        return node

    def visit_Name(self, node):
        # len, range, ...: not the learner's choice, and they carry meaning
        if node.id not in _BUILTINS:
            node.id = self._rename(node.id)
        return node

    def visit_AnnAssign(self, node):  # x: int = 1 reads as x = 1
        if node.value is None:
            return None
        return ast.copy_location(
            ast.Assign(
                targets=[self.visit(node.target)],
                value=self.visit(node.value),
            ),
            node,
        )

    # a bare string in a body is a comment, not code
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str
        ):
            return None
        return self.generic_visit(node)


def fingerprint(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    min_nodes: int = MIN_NODES,
) -> str | None:
    """The definition ``node`` up to names and formatting (None when it has fewer than ``min_nodes``
    syntax nodes: too small to tell)."""
    if sum(1 for _ in ast.walk(node)) < min_nodes:
        return None
    canonical = _Canonical()
    # The definition's own name is kept: the graded name is the same in every answer anyway.
    tree = canonical.visit(copy.deepcopy(node))
    tree.name = "_"
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def definitions(source: str) -> dict[str, ast.AST]:
    """{name: node} of every function and class defined anywhere in ``source`` (methods and
    nested functions included; a later definition of a name wins); bad syntax defines nothing."""
    try:
        tree = ast.parse(
            "\n".join(
                "" if ln.lstrip().startswith(("%", "!")) else ln
                for ln in source.splitlines()
            )
        )
    except SyntaxError:
        return {}
    return {
        n.name: n
        for n in ast.walk(tree)
        if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        )
    }


def _answer_cells(nb) -> list:
    return [
        c
        for c in nb.cells
        if c.cell_type == "code"
        and c.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]


def graded_names(source_notebook) -> dict[str, str]:
    """{function or class name: exercise (grade id)} defined at the top level of the answer cells
    of a source notebook (an nbformat notebook)."""
    from .markers import defined_names

    out = {}
    for cell in _answer_cells(source_notebook):
        tops = definitions(cell.source)
        for name in defined_names(cell.source):
            if name in tops:
                out[name] = cell.metadata["nbgrader"]["grade_id"]
    return out


def course_answers(
    source_notebook,
    references: Path | None = None,
    min_nodes: int = MIN_NODES,
) -> dict[str, set[str]]:
    """{graded name: fingerprints of the course's answers}: the source notebook's answer (what
    the reader's edition shows) and the definition of the same name in ``references`` (the
    folder of ``course_utils.references``; default: this package's own)."""
    from .markers import strip_solution_markers

    names = graded_names(source_notebook)
    found: dict[str, set[str]] = {name: set() for name in names}
    sources = [
        strip_solution_markers(c.source)
        for c in _answer_cells(source_notebook)
    ]
    # where this installation's course_utils.references lives (found, not imported)
    if references is None:
        import importlib.util

        references = Path(
            importlib.util.find_spec(
                "course_utils.references"
            ).submodule_search_locations[0]
        )
    sources += [
        p.read_text(encoding="utf-8")
        for p in sorted(references.glob("*.py"))
    ]
    for source in sources:
        for name, node in definitions(source).items():
            if (
                name in found
                and (fp := fingerprint(node, min_nodes)) is not None
            ):
                found[name].add(fp)
    return {name: fps for name, fps in found.items() if fps}


def copied_answers(
    submission, answers: dict[str, set[str]], exercises: dict[str, str]
) -> list[str]:
    """One flag per graded function or class of ``submission`` (an nbformat notebook) that is
    one of the course's ``answers`` (``course_answers``) up to names and formatting."""
    flags = []
    for cell in _answer_cells(submission):
        for name, node in definitions(cell.source).items():
            if name in answers and fingerprint(node) in answers[name]:
                flags.append(
                    f"{name} ({exercises.get(name, cell.metadata['nbgrader'].get('grade_id'))}) is the "
                    "course's published answer up to names and formatting (the reader's edition)"
                )
    return flags


_FENCE = re.compile(
    r"^(```|~~~)[ \t]*\{?(?:code-cell|code)?\}?[ \t]*(?:python|ipython3?)?[ \t]*$(.*?)^\1",
    re.M | re.S,
)


def answers_in(
    folder: Path, answers: dict[str, set[str]], min_nodes: int = MIN_NODES
) -> list[str]:
    """Where the files under ``folder`` (Python files, notebooks' code cells, Markdown code blocks)
    define one of the course's ``answers`` (fingerprints made with the same ``min_nodes``), under
    any name: ``"path:line: name is the course's answer to X"``.  The class edition must give none."""
    import nbformat

    wanted = {fp: name for name, fps in answers.items() for fp in fps}
    found = []
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix == ".py":
            sources = [
                ("", path.read_text(encoding="utf-8", errors="replace"))
            ]
        elif path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            sources = [
                (f"cell {i}, ", c.source)
                for i, c in enumerate(nb.cells, 1)
                if c.cell_type == "code"
            ]
        elif path.suffix == ".md":
            sources = [
                (f"code block {i}, ", m.group(2))
                for i, m in enumerate(
                    _FENCE.finditer(
                        path.read_text(encoding="utf-8", errors="replace")
                    ),
                    1,
                )
            ]
        else:
            continue
        for place, source in sources:
            for name, node in definitions(source).items():
                if (fp := fingerprint(node, min_nodes)) in wanted:
                    found.append(
                        f"{path.relative_to(folder)}:{place}line {node.lineno}: {name} is the course's answer to "
                        f"{wanted[fp]}"
                    )
    return found
