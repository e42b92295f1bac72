"""The grader's defences against a notebook that disables its checks: the static scan of a
submission's source (course_utils.grading.tamper) and the in-kernel integrity snapshot
(course_utils.grading.integrity) that ``pristine()`` checks."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course_utils.grading.tamper import scan_notebook, scan_source

FLAGGED = {
    "torch function": "import torch\ntorch.isclose = lambda *a, **k: None",
    "alias of torch": "import torch as t\nt.allclose = print",
    "Tensor method through from-import": "from torch import Tensor\nTensor.all = lambda self: True",
    "setattr on a torch class": "import torch\nsetattr(torch.Tensor, 'all', len)",
    "functional": "import torch.nn.functional as F\nF.softmax = None",
    "course_utils checks": "from course_utils.grading import checks\nchecks.assert_close = lambda *a, **k: None",
    "computed setattr on course_utils": "import course_utils.grading.checks\nfor n in ['compare']:\n"
    "    setattr(course_utils.grading.checks, n, None)",
    "builtins": "import builtins\nbuiltins.abs = lambda x: 0",
    "__builtins__": "__builtins__.len = lambda x: 0",
    "sys.modules": "import sys\nsys.modules['course_utils.grading.checks'] = None",
    "swallowed errors": "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
    "excepthook": "import sys\nsys.excepthook = print",
    "deleting a function": "import torch\ndel torch.isclose",
}
CLEAN = {
    "settings": "import torch\ntorch.backends.cudnn.benchmark = True\ntorch.manual_seed(0)",
    "tensor attributes": "import torch\nx = torch.zeros(3)\nx.requires_grad = True\nx.grad = None",
    "module attributes": "import torch\nfrom torch import nn\nm = nn.Linear(2, 2)\nm.weight.data[:] = 0\n"
    "m.bias = None\nm.training = False",
    "rcParams": "import matplotlib.pyplot as plt\nplt.rcParams['figure.dpi'] = 80",
    "magics": "%matplotlib inline\n!ls\nprediction = 'C'",
    "own class": "class A:\n    pass\nA.f = print\na = A()\na.x = 1",
}


@pytest.mark.parametrize("label", FLAGGED)
def test_scan_flags_rebinding(label):
    assert scan_source(FLAGGED[label]), f"not flagged: {label}"


@pytest.mark.parametrize("label", CLEAN)
def test_scan_leaves_ordinary_code_alone(label):
    assert scan_source(CLEAN[label]) == []


def test_scan_notebook_names_cell_and_line(tmp_path):
    nb = new_notebook(
        cells=[
            new_code_cell(
                "import torch\nfrom course_utils.grading import checks"
            ),
            new_code_cell("x = 1\ntorch.isclose = None"),
        ]
    )
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    assert scan_notebook(path) == [
        "cell 2, line 2: assigns to torch.isclose, a function of the library"
    ]


_KERNEL = """
import builtins, torch
import course_utils, torchvision, matplotlib.pyplot, einops
from course_utils.grading import pristine
from course_utils.references import vit, multihead, positional
from course_utils.training import data, trainer
from course_utils.models import transformer
pristine()  # the course's own imports rebind nothing
for tamper, home, name in [
    ("torch.isclose = torch.eq", torch, "isclose"),
    ("torch.Tensor.all = lambda self, *a, **k: torch.tensor(True)", torch.Tensor, "all"),
    ("builtins.abs = lambda x: 0", builtins, "abs"),
    ("torch.nn.functional.softmax = torch.softmax", torch.nn.functional, "softmax"),
]:
    original = getattr(home, name)
    exec(tamper)
    try:
        pristine()
        print("MISSED", tamper)
    except AssertionError as exc:
        assert name in str(exc), exc
        print("DETECTED", name)
    setattr(home, name, original)
    pristine()  # restored: passes again
"""


def test_pristine_fails_after_rebinding():
    out = subprocess.run(
        [sys.executable, "-c", _KERNEL],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (
        "MISSED" not in out.stdout and out.stdout.count("DETECTED") == 4
    ), out.stdout
