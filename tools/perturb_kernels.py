"""Run in a notebook's kernel before its first cell (tools/check_notebooks.py --perturb): every
floating-point result whose bits depend on the CPU's kernels is moved by a few units in the last
place, the size of the difference another CPU's kernels make.  A stored output that changes
under it prints more digits than the computation holds on every CPU.

What moves: reductions and products (sums, means, matrix products, convolutions, softmax,
normalisations), transcendental functions (exp, log, sin, tanh, GELU...) and random normals:
the operations whose vectorised or multi-threaded kernels round differently.  Elementwise
+, -, * and / round exactly as IEEE 754 says on every CPU and are left alone, and so is every
element whose value is a whole number (a product of small integers is exact everywhere).

This is an author's audit, not a test: a comparison of two formulations with ``torch.equal``
also changes under it, although on any one CPU both give the same bits.  Read each change.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_OPS = frozenset(
    """
    mm bmm addmm baddbmm addmv mv dot matmul einsum sum mean prod cumsum logsumexp var std var_mean std_mean
    linalg_vector_norm norm _softmax _log_softmax _softmax_backward_data _log_softmax_backward_data
    native_layer_norm native_layer_norm_backward native_batch_norm _native_batch_norm_legit
    _native_batch_norm_legit_no_training convolution convolution_backward mkldnn_convolution
    _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_flash_attention_for_cpu_backward
    exp expm1 log log1p log2 sin cos tan tanh sigmoid gelu erf pow rsqrt normal
    upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa nll_loss_forward
""".split()
)
# Relative size of the move: about 3 units in the last place of each precision.
_REL = {
    torch.float32: 4e-7,
    torch.float64: 7e-16,
    torch.bfloat16: 8e-3,
    torch.float16: 1.5e-3,
}
_GEN = torch.Generator().manual_seed(20261126)


def _move(t):
    if not (
        isinstance(t, torch.Tensor)
        and t.dtype in _REL
        and t.numel()
        and t.device.type == "cpu"
    ):
        return t
    with torch.no_grad():
        wide = t.double()
        step = (
            torch.rand(t.shape, generator=_GEN, dtype=torch.float64) * 2 - 1
        )
        moved = torch.where(
            wide == wide.round(), wide, wide * (1 + _REL[t.dtype] * step)
        )
        return moved.to(t.dtype)


class PerturbKernels(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[-1].rstrip("_")
        if name not in _OPS:
            return out
        if isinstance(out, torch.Tensor):
            # in place (normal_): move the tensor itself
            if func._schema.is_mutable:
                with torch.no_grad():
                    out.copy_(_move(out))
                return out
            return _move(out)
        if isinstance(out, tuple):
            return tuple(_move(o) for o in out)
        return out


PerturbKernels().__enter__()  # for the rest of the kernel's life
