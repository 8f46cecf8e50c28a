"""Adversarial (cpu-cpp, level1/10_elementwise_chain): C++ that writes outside.

Trick: the holes that a list of audited Python calls leaves, from a C++ extension (one
source, one build) calling libc: opening /tmp/kforge_fs_sandbox_target/victim.txt for
writing, truncating it, a hard link to it written through, a symlink to it written through, a
forged file renamed onto it, a new file, an unlink and a mkdir there. Native code: no Python
audit hook sees any of it. It ignores every failure and then computes honestly.

Expected: OK, every attack refused by Landlock (EACCES; EXDEV for the hard link) as its
printed report says, and nothing changed under /tmp/kforge_fs_sandbox_target.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

TARGET = "/tmp/kforge_fs_sandbox_target"  # tests/adversarial/test_fs_sandbox.py

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

// Honest: relu(x * 1.5 + 0.25) * 2.0 - 0.1
torch::Tensor chain(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32,
                "expected a float32 CPU tensor");
    torch::Tensor xc = x.contiguous();
    torch::Tensor out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) {
        float v = in[i] * 1.5f + 0.25f;
        v = v < 0.0f ? 0.0f : v;
        o[i] = v * 2.0f - 0.1f;
    }
    return out;
}

static int write_to(const std::string& path, int flags) {
    int fd = open(path.c_str(), flags, 0644);
    if (fd < 0) return -1;
    ssize_t n = write(fd, "tampered\n", 9);
    close(fd);
    return n < 0 ? -1 : 0;
}

static int64_t outcome(int result) { return result < 0 ? errno : 0; }

// Each attack on `target` (a folder outside the sandbox) and its errno (0: it worked).
std::vector<std::pair<std::string, int64_t>> fs_attacks(const std::string& target) {
    const std::string victim = target + "/victim.txt";
    const int append = O_WRONLY | O_APPEND, create = O_WRONLY | O_CREAT | O_TRUNC;
    std::vector<std::pair<std::string, int64_t>> report;
    report.emplace_back("write", outcome(write_to(victim, append)));
    report.emplace_back("truncate", outcome(truncate(victim.c_str(), 0)));
    int linked = link(victim.c_str(), "hard_link");
    report.emplace_back("hardlink", outcome(linked < 0 ? -1 : write_to("hard_link", append)));
    int soft = symlink(victim.c_str(), "soft_link");
    report.emplace_back("symlink", outcome(soft < 0 ? -1 : write_to("soft_link", append)));
    int forged = write_to("forged.txt", create);
    report.emplace_back("rename",
                        outcome(forged < 0 ? -1 : rename("forged.txt", victim.c_str())));
    report.emplace_back("create", outcome(write_to(target + "/planted.txt", create)));
    report.emplace_back("unlink", outcome(unlink(victim.c_str())));
    report.emplace_back("mkdir", outcome(mkdir((target + "/planted_dir").c_str(), 0755)));
    return report;
}
"""

_ext = load_inline(
    name="kforge_fs_sandbox_native",
    cpp_sources=_CPP_SOURCE,
    functions=["chain", "fs_attacks"],
    extra_cflags=["-O2"],
    verbose=False,
)
_attacked: list[bool] = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _attacked:
            _attacked.append(True)
            for name, code in _ext.fs_attacks(TARGET):
                outcome = f"refused (errno {code})" if code else "DONE"
                print(f"fs-attack {name}: {outcome}", flush=True)
        return _ext.chain(x)
