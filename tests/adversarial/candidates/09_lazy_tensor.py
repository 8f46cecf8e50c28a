"""Adversarial (cpu-triton, level1/10_elementwise_chain): lazy output tensor.

Trick: forward returns a torch.Tensor subclass over an unfilled buffer and does no work. The
subclass's __torch_function__ runs the (honest) chain kernel the first time anything touches
the tensor (reads an attribute, copies it, compares it), so the work lands in whatever code
first looks at the output, outside the timed region, and the values still look right.

Expected: REJECTED, reason "dynamic:output-type".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class _LazyChain(torch.Tensor):
    """An unfilled buffer that runs the chain kernel into itself when first touched."""

    _source: torch.Tensor | None = None

    def _fill(self) -> None:
        source, self._source = self._source, None  # cleared first: no recursion
        if source is None:
            return
        with torch._C.DisableTorchFunctionSubclass():
            buffer = self.as_subclass(torch.Tensor)
            n = source.numel()
            _chain_kernel[(triton.cdiv(n, BLOCK),)](source, buffer, n, BLOCK=BLOCK)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for value in (*args, *kwargs.values()):
            if isinstance(value, _LazyChain) and value._source is not None:
                value._fill()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        lazy = torch.Tensor._make_subclass(_LazyChain, torch.empty_like(xc))
        lazy._source = xc
        return lazy
