"""level1/08_sum_reduction on cpu-cpp: compensated (Kahan) summation.

Technique: the reduced dimension is moved to the middle (a view; made contiguous) and summed
row by row into float32 running sums per column, each with Kahan's compensation (the
rounding error of every addition is fed back into the next), as exact as a float64 sum
rounded once.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The C++ source, extension name and flags below are byte-identical in every cpp_* candidate
# of this folder, so the evaluator builds "kforge_honest_unusual" once for all of them.

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <vector>

// Shared by the cpp_* candidates of examples/candidates/unusual: one build serves them all.

static torch::Tensor checked(const torch::Tensor& t, int64_t dim) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.dim() == dim,
                "expected a float32 CPU tensor with ", dim, " dimensions");
    return t.contiguous();
}

// relu(x @ W^T + b) with k outermost (a rank-1 update of the whole output per k) into
// float64 accumulators, rounded to float32 once, after the bias
torch::Tensor gemm_bias_relu_double(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    const torch::Tensor xc = checked(x, 2), wc = checked(w, 2), bc = checked(b, 1);
    const int64_t m = xc.size(0), k = xc.size(1), n = wc.size(0);
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    std::vector<double> acc(static_cast<size_t>(m * n), 0.0);
    for (int64_t kk = 0; kk < k; ++kk) {
        for (int64_t i = 0; i < m; ++i) {
            const double xv = xp[i * k + kk];
            double* row = acc.data() + i * n;
            for (int64_t j = 0; j < n; ++j) {
                row[j] += xv * static_cast<double>(wp[j * k + kk]);
            }
        }
    }
    torch::Tensor out = torch::empty({m, n}, xc.options());
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            const double v = acc[i * n + j] + bp[j];
            op[i * n + j] = v > 0.0 ? static_cast<float>(v) : 0.0f;
        }
    }
    return out;
}

// [B, D1, D2] summed over D1 into [B, 1, D2], each column with Kahan's compensation
torch::Tensor sum_dim1_kahan(torch::Tensor x) {
    const torch::Tensor xc = checked(x, 3);
    const int64_t batch = xc.size(0), d1 = xc.size(1), d2 = xc.size(2);
    const float* xp = xc.data_ptr<float>();
    torch::Tensor out = torch::empty({batch, 1, d2}, xc.options());
    float* op = out.data_ptr<float>();
    std::vector<float> total(static_cast<size_t>(d2)), carry(static_cast<size_t>(d2));
    for (int64_t bi = 0; bi < batch; ++bi) {
        std::fill(total.begin(), total.end(), 0.0f);
        std::fill(carry.begin(), carry.end(), 0.0f);
        for (int64_t r = 0; r < d1; ++r) {
            const float* row = xp + (bi * d1 + r) * d2;
            for (int64_t c = 0; c < d2; ++c) {
                const float y = row[c] - carry[c];
                const float t = total[c] + y;
                carry[c] = (t - total[c]) - y;
                total[c] = t;
            }
        }
        std::copy(total.begin(), total.end(), op + bi * d2);
    }
    return out;
}

// row softmax of a [rows, cols] input in float64: max, then exp and its sum, then the quotient
torch::Tensor softmax_rows_double(torch::Tensor x) {
    const torch::Tensor xc = checked(x, 2);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* xp = xc.data_ptr<float>();
    torch::Tensor out = torch::empty_like(xc);
    float* op = out.data_ptr<float>();
    std::vector<double> e(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = xp + r * cols;
        double m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, static_cast<double>(row[c]));
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            e[c] = std::exp(static_cast<double>(row[c]) - m);
            s += e[c];
        }
        for (int64_t c = 0; c < cols; ++c) op[r * cols + c] = static_cast<float>(e[c] / s);
    }
    return out;
}
"""

_ext = load_inline(
    name="kforge_honest_unusual",
    cpp_sources=_CPP_SOURCE,
    functions=["gemm_bias_relu_double", "sum_dim1_kahan", "softmax_rows_double"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xm = x.movedim(self.reduce_dim, 1)
        out = _ext.sum_dim1_kahan(xm.reshape(xm.shape[0], xm.shape[1], -1))
        shape = list(xm.shape)
        shape[1] = 1
        return out.reshape(shape).movedim(1, self.reduce_dim)
