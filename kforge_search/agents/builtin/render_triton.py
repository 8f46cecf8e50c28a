"""A Plan and a TritonGenome as one self-contained Triton candidate (ModelNew)."""

from __future__ import annotations

import dataclasses

from kforge_search.agents.builtin import render as r
from kforge_search.agents.builtin.genome import TritonGenome, flat
from kforge_search.agents.builtin.ir import Kind
from kforge_search.agents.builtin.ops import TRITON_HELPERS
from kforge_search.agents.builtin.plan import Plan, StagePlan
from kforge_search.agents.builtin.source import model_source
from kforge_search.agents.builtin.triton_kernels import (
    Kernel,
    gemm_kernel,
    low_dot,
    pass_kernel,
    promoted,
    split_pass_kernels,
    splittable,
    uses_presplit,
    uses_tma,
)
from kforge_search.agents.builtin.triton_lines import Names

BF16 = ("bf16", "bf16x3")  # precisions whose dots take bf16 tiles (fp32 ones in the interpreter)

# The most parts a row pass is split into (its partial results: a float64 workspace slot per
# part, combined by one load of PARTS). 256 left the H200 at 10% of its roofline on one row
# of 1.9e9 elements (Frobenius norm: 256 programs on 132 SMs, two a SM at most)
MAX_PARTS = 4096


def _launch(kernel: Kernel, grid: str, head: list[str], sizes: list[str], consts: str) -> str:
    args = [*head, *kernel.args(), *sizes]
    if "WIDE: tl.constexpr" in kernel.source:  # int64 offsets only where int32 would not do
        consts += f", WIDE={_wide(args, 'PLANE' in kernel.params)}"
    return f"{kernel.name}[{grid}]({', '.join(args)}, {consts})"


def _wide(args: list[str], swapped: bool = False) -> str:
    """Whether a row's offset (row times a tensor's row length) may pass int32 in a kernel
    launched with `args`: rows up to R plus a tile's (256), times the longest row it indexes
    (its tensors' `.shape[-1]`). int32 offsets: H200, 26_GELU 3.36 -> 3.22 ms, 47_Sum 2.16
    -> 2.11 (compile 3.03, eager 2.07); the module's _KF_NARROW bounds them. `swapped`: the
    kernel indexes tensors in a swapped stage's layout (Gemm.swap_of), whose row lengths
    do not bound their offsets: their sizes too."""
    lengths = [a for a in args if a.endswith(".shape[-1]")]
    longest = (
        f" * max({', '.join(lengths)})" if len(lengths) > 1 else "".join(f" * {a}" for a in lengths)
    )
    if swapped:
        sizes = [f"{a.removesuffix('.shape[-1]')}.numel()" for a in lengths]
        return f"max((R + 256){longest}, {', '.join(sizes)}) >= _KF_NARROW"
    return f"(R + 256){longest} >= _KF_NARROW"


class StageWriter:
    """Kernels and forward lines of one stage."""

    def __init__(self, plan: Plan, stage: StagePlan, genome: TritonGenome, names: Names):
        self.plan, self.stage, self.genome, self.names = plan, stage, genome, names
        self.kernels: list[Kernel] = []
        self.s = stage.index
        self.b_kn = _b_operand(stage, genome)[1] == "kn"
        self.tma = uses_tma(stage, genome, "full")
        self.presplit = uses_presplit(stage, genome)
        self.b = f"wp{self.s}" if self.presplit else f"w{self.s}"  # what the kernels read
        self.swapped = bool(stage.gemm.swap_of)  # its input read in place (Gemm.swap_of)

    def _gemm(self, name: str, mode: str, targets: tuple[int, ...], leaves: set[int]) -> Kernel:
        return gemm_kernel(
            self.plan, self.stage, self.genome, self.names, name, mode, targets, leaves, self.b_kn
        )

    def _operands(self, head: list[str], bm: str, bn: str) -> tuple[list[str], list[str], str]:
        """(lines before the launch, its leading arguments, the TMA and PROMOTE constants) for
        a GEMM launch with tiles bm x bn: descriptors come after the operand (and workspace)
        pointers, then the offset of B's lo part (presplit: hi and lo side by side along N)."""
        s, bk = self.s, self.genome.block_k
        pre, consts = [], ""
        if self.tma:
            copy = ", copy=False" if self.presplit else ""  # lo at an offset of N
            pre = [f"da{s}, db{s} = _kf_descs(a{s}, {self.b}, {bm}, {bn}, {bk}, {self.b_kn}{copy})"]
            head, consts = [*head, f"da{s}", f"db{s}"], f", TMA=da{s} is not None"
        if self.presplit:
            head = [*head, f"N{s} * sb{s}[2]"]
        if promoted(self.genome):
            consts += f", PROMOTE={self.genome.promote}"
        return pre, head, consts

    def _sizes(self, nc: str | None = None, pool: str | None = None, plane: str = "0") -> list[str]:
        s = self.s
        window = [f"*wa{s}"] if self.stage.gemm.window is not None else []
        return [
            f"M{s}",
            f"N{s}",
            f"K{s}",
            nc or f"NC{s}",
            "R",
            f"SEG{s}",
            "G",
            pool or f"POOL{s}",
            plane,
            f"*sa{s}",
            f"*sb{s}",
            *window,
        ]

    def _consts(self, bm: str, bn: str, split: int = 1, dot: bool = True) -> str:
        gn = self.genome
        bf16 = ", BF16_IN_FP32=_KF_BF16_IN_FP32" if dot and gn.precision in BF16 else ""
        if dot and low_dot(self.plan, self.stage):
            bf16 += ", LOWP_IN_FP32=_KF_LOWP_IN_FP32"
        # K slices of whole BLOCK_K steps: the K loop needs no masks
        even = f", EVEN_K=K{self.s} % {gn.block_k * split} == 0" if dot else ""
        window = f", **wc{self.s}" if self.stage.gemm.window is not None else ""
        return (
            f"BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={gn.block_k}, GROUP_M={gn.group_m}, "
            f"SPLIT_K={split}, num_warps={gn.num_warps}, num_stages={gn.num_stages}{even}{bf16}"
            f"{window}"
        )

    def _alloc(self, ids: tuple[int, ...]) -> list[str]:
        graph = self.plan.graph

        def dtype(n: int) -> str:  # indices (argmax) int64, the output its dtype, the rest float32
            if n != graph.output:
                return "float32"
            return "int64" if graph.int_output else graph.dtype

        return [
            f"b{n} = torch.empty({r.buffer_shape(self.plan.kind(n), self.s, self.swapped)}, "
            f"device=a0.device, dtype=torch.{dtype(n)})"
            for n in ids
        ]

    def second_pass_lines(self, leaves: set[int]) -> list[str]:
        st, s, gn = self.stage, self.s, self.genome
        stores = tuple(dict.fromkeys((*st.gemm_stores, *(n for n in st.outs if n in st.phase0))))
        apart = (n for n in (*stores, *st.outs) if n not in st.col_outs)  # made by the pass
        lines = self._alloc(tuple(dict.fromkeys(apart)))
        grid = f"(triton.cdiv(M{s}, {gn.block_m}) * triton.cdiv(NC{s}, {gn.block_n}), 1, BT{s})"
        consts = self._consts(str(gn.block_m), str(gn.block_n))
        if gn.split_k > 1 and not st.gemm.anchor and st.gemm.window is None:
            part = self._gemm(f"_kf_s{s}_partial", "partial", (), leaves)
            red = self._gemm(f"_kf_s{s}_reduce", "reduce", stores, leaves)
            self.kernels += [part, red]
            pgrid = (
                f"(triton.cdiv(M{s}, {gn.block_m}) * triton.cdiv(N{s}, {gn.block_n}), "
                f"{gn.split_k}, BT{s})"
            )
            split_consts = self._consts(str(gn.block_m), str(gn.block_n), gn.split_k)
            lines.append(
                f"ws{s} = torch.empty(({gn.split_k}, R, N{s}), device=a0.device, "
                "dtype=torch.float32)"
            )
            plane = f"R * N{s}"
            pre, head, tma = self._operands(
                [f"a{s}", self.b, f"ws{s}"], str(gn.block_m), str(gn.block_n)
            )
            lines += pre
            lines.append(
                _launch(part, pgrid, head, self._sizes(f"N{s}", "1", plane), split_consts + tma)
            )
            reduce_consts = self._consts(str(gn.block_m), str(gn.block_n), gn.split_k, dot=False)
            lines.append(_launch(red, grid, [f"ws{s}"], self._sizes(plane=plane), reduce_consts))
        elif st.gemm.anchor and not stores:
            pass  # a tile with nothing to write: the passes read the input themselves
        else:
            kernel = self._gemm(f"_kf_s{s}_gemm", "full", stores, leaves)
            self.kernels.append(kernel)
            pre, head, tma = self._operands([f"a{s}", self.b], str(gn.block_m), str(gn.block_n))
            lines += pre
            if st.gemm.window is not None:
                # tiles no wider than the pooled rows, and few rows: the input a tile's row
                # of kernel offsets spans (its columns times the stride) within a quarter
                # of block_m x block_n. H100, published sizes, ms: 42_MaxPool2D (k4 s1)
                # 16x256 10.9, 4x256 3.85 (compile 4.29); 45_AvgPool2D (k11 s11) 16x64
                # 12.7, 2x512 6.04 (eager 6.54); 41_MaxPool1D 16x256 5.02, 4x256 3.69.
                # Triton's interpreter (tensors on the CPU) runs a program per Python loop
                # step: there tiles keep 16 rows (its pooling tests took 3.6x as long)
                budget = gn.block_m * gn.block_n // 4
                lines += [
                    f"wbn{s} = min({gn.block_n}, max(16, triton.next_power_of_2(NC{s})))",
                    f"wbm{s} = max(1 if a{s}.is_cuda else 16, min(triton.next_power_of_2(M{s}), "
                    f"1 << (max(1, {budget} // (wbn{s} * ws{s}[-1])).bit_length() - 1)))",
                ]
                grid = f"(triton.cdiv(M{s}, wbm{s}) * triton.cdiv(NC{s}, wbn{s}), 1, BT{s})"
                consts = self._consts(f"wbm{s}", f"wbn{s}")
            if flat(gn) and st.gemm.window is None and st.pool is None:
                # rows shorter than the tile: more of them per tile, as many elements
                lines += [
                    f"fbn{s} = min({gn.block_n}, max(16, triton.next_power_of_2(NC{s})))",
                    f"fbm{s} = {gn.block_m * gn.block_n} // fbn{s}",
                ]
                grid = f"(triton.cdiv(M{s}, fbm{s}) * triton.cdiv(NC{s}, fbn{s}), 1, BT{s})"
                consts = self._consts(f"fbm{s}", f"fbn{s}")
            if self.stage.pool is not None:  # whole windows per tile where the size allows
                lines += [
                    f"pw{s} = POOL{s} if POOL{s} & (POOL{s} - 1) == 0 and POOL{s} <= {gn.block_n}"
                    " else 1",
                    f"bnp{s} = {gn.block_n} // pw{s}",
                ]
                grid = f"(triton.cdiv(M{s}, {gn.block_m}) * triton.cdiv(NC{s}, bnp{s}), 1, BT{s})"
                consts = self._consts(str(gn.block_m), f"bnp{s}") + f", POOL_W=pw{s}"
            lines.append(_launch(kernel, grid, head, self._sizes(), consts + tma))
        if st.tail:
            lines += self._pass_lines(leaves | set(stores))
        return lines

    def _pass_lines(self, leaves: set[int]) -> list[str]:
        st = self.stage
        lines: list[str] = []
        if st.col_tail:  # column statistics first, their per-column results to buffers
            first = st.column_pass()
            lines += self._alloc(first.outs) + self._one_pass(first, leaves, "_pre")
            leaves = leaves | set(first.outs)
        lines += self._one_pass(st, leaves)
        if st.row2_tail:  # whole rows, after the segments: reads what that pass wrote
            written = {n for n in st.outs if n not in st.row2_tail}
            lines += self._one_pass(st.whole_row_pass(), leaves | written, "_whole")
        if st.post_tail:  # statistics over the rows of the row pass's results: one program
            last = st.final_pass()
            lines += self._alloc(last.outs)
            lines += self._one_pass(last, leaves | set(st.outs), "_post", one=True)
        return lines

    def _one_pass(
        self, st: StagePlan, leaves: set[int], suffix: str = "", one: bool = False
    ) -> list[str]:
        s, gn = self.s, self.genome
        kernel = pass_kernel(self.plan, st, self.names, f"_kf_s{s}_{st.axis}s{suffix}", leaves)
        self.kernels.append(kernel)
        whole = suffix == "_whole"  # segments as long as the row
        seg = f"NC{s}" if whole else f"SEG{s}"
        # the last pass (one program) computes its one column redundantly in each of its
        # BLOCK_C lanes: NC stays the space's, as sizes in its expressions (a mean) need
        sizes = ["R", f"NC{s}", seg, "G"]
        if st.axis == "row":
            segments = "G" if st.segmented else "1"
            block = f"min({gn.pass_block}, max(16, triton.next_power_of_2({seg})))"
            consts = f"BLOCK=pass_block, num_warps={gn.pass_warps}"
            many = f"{seg} <= _KF_SHORT_ROW and R * {segments} >= _KF_MANY_ROWS"
            rpp = f"rpp = _KF_RPP if {many} else 1"  # rows per program (rows.py.j2)
            grid = f"(triton.cdiv(R, rpp), {segments})"
            launch = _launch(kernel, grid, [], sizes, f"{consts}, RPP=rpp")
            if not gn.pass_programs or one or not splittable(self.plan, st):
                return [f"pass_block = {block}", rpp, launch]
            parts = self._split_pass(st, leaves, kernel.name, segments, seg, sizes, consts, launch)
            return [f"pass_block = {block}", rpp, *parts]
        if one:  # its one column once, down the rows in long steps (POST_ROWS)
            consts = f"BLOCK_R=_KF_POST_ROWS, BLOCK_C=1, ONE=False, num_warps={gn.pass_warps}"
            return [_launch(kernel, "(1, 1)", [], [*sizes, "R"], consts)]
        batched = st.batched_cols
        walked = "BR" if batched else "R"  # the rows each program walks
        # columns of at most _KF_TILE_ROWS rows in one tile of 64 columns, read once (ONE:
        # cols.py.j2) (H200, 36_RMSNorm's 64 rows of 262144 columns, hand kernels: 64 x 64
        # read once with 4 warps 3.68 ms, 32 x 32 walked twice 4.46, compile 3.95; the
        # 64 x 64 tile walked twice with float64 lanes 5.07); longer ones in steps
        tile = (
            f"col_r, col_c = (max(16, triton.next_power_of_2({walked})), 64) "
            f"if {walked} <= _KF_TILE_ROWS else ({max(16, gn.pass_block // 32)}, 32)"
        )
        consts = (
            f"BLOCK_R=col_r, BLOCK_C=col_c, ONE={walked} <= _KF_TILE_ROWS, "
            f"num_warps={gn.pass_warps}"
        )
        grid = f"(triton.cdiv(NC{s}, col_c), {'R // BR' if batched else 1})"
        return [tile, _launch(kernel, grid, [], [*sizes, walked], consts)]

    def _split_pass(
        self, st: StagePlan, leaves: set[int], name: str, segments: str, seg: str,
        sizes: list[str], consts: str, launch: str,
    ) -> list[str]:  # fmt: skip
        """A row pass in parts where it has fewer (row, segment) programs than the genome's
        `pass_programs` and rows of 16 blocks or more (split_pass_kernels), else `launch`:
        parts a power of two, each at least 8 blocks of the row, at most MAX_PARTS."""
        s, gn = self.s, self.genome
        kernels, spaces = split_pass_kernels(self.plan, st, self.names, name, leaves)
        self.kernels += kernels
        parts, chunk = f"parts_{name}", f"chunk_{name}"
        fewer = f"max(1, {gn.pass_programs} // max(1, R * {segments}))"
        longer = f"max(1, triton.cdiv({seg}, 8 * pass_block))"
        grid = f"(R, {segments}, {parts})"
        return [
            f"{parts} = min(1 << ({fewer}.bit_length() - 1), "
            f"1 << ({longer}.bit_length() - 1), {MAX_PARTS})",
            f"if {parts} > 1:",
            f"    {chunk} = triton.cdiv(triton.cdiv({seg}, {parts}), pass_block) * pass_block",
            *(
                f"    {w} = torch.empty(R * {segments} * {parts}, device=a{s}.device, "
                f"dtype=torch.{dtype})"
                for w, dtype in spaces
            ),
            *(
                "    " + _launch(k, grid, [], [*sizes, chunk], f"{consts}, PARTS={parts}")
                for k in kernels
            ),
            "else:",
            f"    {launch}",
        ]

    def fused_lines(self, leaves: set[int]) -> list[str]:
        st, s, gn = self.stage, self.s, self.genome
        kernel = self._gemm(f"_kf_s{s}_fused", "full", st.outs, leaves)
        self.kernels.append(kernel)
        if st.axis == "row":
            sizes = [
                f"bn = max(16, triton.next_power_of_2(NC{s}))",
                f"bm = max(16, min({gn.block_m}, 8192 // bn))",
            ]
            grid = f"(triton.cdiv(M{s}, bm), 1, BT{s})"
        else:
            sizes = [
                "bm = max(16, triton.next_power_of_2(R))",
                f"bn = max(16, min({gn.block_n}, 8192 // bm))",
            ]
            grid = f"(triton.cdiv(NC{s}, bn), 1, BT{s})"
        pre, head, tma = self._operands([f"a{s}", self.b], "bm", "bn")
        pooled = ", POOL_W=1" if st.pool is not None else ""  # a whole row: windows looped
        launch = _launch(kernel, grid, head, self._sizes(), self._consts("bm", "bn") + pooled + tma)
        return [*self._alloc(st.outs), *sizes, *pre, launch]

    def lines(self) -> tuple[list[str], list[str]]:
        """(lines making A, the rest of the stage)."""
        st, s, gn = self.stage, self.s, self.genome
        a_lines, a = r.a_operand(self.plan, st, in_place=True)
        g = st.gemm
        dot = not g.anchor and not g.window
        if gn.precision == "tf32rn" and dot:  # rounded to nearest tf32, K-major (a copy)
            a_lines = [*a_lines, f"{a} = _kf_tf32rn({a})"]
        elif gn.precision in K_MAJOR and isinstance(g.a, str) and dot:
            # a transposed input (`A.T @ B`) K-major too: free where it already is
            a_lines = [*a_lines, f"{a} = {a}.contiguous()  # K-major rows for tf32 dots"]
        elif gn.precision == "bf16" and gn.cast == "call" and dot:
            # A in bf16 once per call, as B is (a weight's made once): the dot's tiles come
            # both in bf16 from shared memory. H200, level2 at 1024 x 8192 x 8192, with A's
            # fp32 tiles converted in registers: 0.350 ms, as fast as tf32 (0.344)
            a_lines = [*a_lines, f"{a} = {a}.to(torch.bfloat16) if {a}.is_cuda else {a}"]
        b_lines, layout = _b_operand(st, gn)
        rest = [
            f"# stage {s}: "
            + (f"{st.gemm.window.fn} pooling" if st.gemm.window else "GEMM")
            + (" + pooling" if st.pool else "")
            + " + epilogue"
            + (f" + {st.axis} statistics" if st.tail else ""),
            *b_lines,
        ]
        rest += r.stage_sizes(self.plan, st, a, f"w{s}", layout, in_place=True)
        rest.append(r.rows_per_batch(self.plan, st))
        if st.gemm.window is not None:
            rest += _window_args(st)
        a_batch, b_batch = (f"{a}.stride(0)", f"w{s}.stride(0)") if st.gemm.batched else ("0", "0")
        k, n = ("-1", "-2") if layout == "nk" else ("-2", "-1")
        rest.append(f"sa{s} = ({a_batch}, {a}.stride(-2), {a}.stride(-1))")
        if self.presplit:  # hi and lo side by side along N, split once (see _kf_pair)
            dim, bf16 = 0 if layout == "nk" else 1, gn.precision == "bf16x3"
            rest.append(
                f'wp{s} = self._kf_derived("_kf_wp{s}", w{s}, lambda w: _kf_pair(w, {dim}, {bf16}))'
            )
        rest.append(f"sb{s} = ({b_batch}, {self.b}.stride({k}), {self.b}.stride({n}))")
        leaves = r.stored_before(self.plan, st)
        if gn.placement == "fused" and st.fusable:
            span = f"NC{s}" if st.axis == "row" else "R"
            fused = self.fused_lines(leaves)
            apart = self.second_pass_lines(leaves)
            rest.append(f"if triton.next_power_of_2({span}) <= {gn.fuse_limit}:")
            rest += ["    " + line for line in fused] + ["else:"]
            rest += ["    " + line for line in apart]
        else:
            rest += self.second_pass_lines(leaves)
        return a_lines, rest


# precisions whose dots run on tf32 tensor cores: Hopper's wgmma takes tf32 operands only
# K-major (each row of A and each column of B with its K values contiguous). A B stored
# [K, N] (N contiguous: `x @ W`, `A @ B`) made the H200's tf32 kernels run at 16% of the
# roofline where a B stored [N, K] (`A @ B.T`) ran at 83%, and a transposed A at 13%
# (KernelBench level 1: 1_Square 1.78 ms, 17_transposed_B 0.335 ms, 16_transposed_A
# 2.16 ms); bf16 operands are read either way
K_MAJOR = ("tf32", "tf32rn", "tf32x3")
# The last pass of a statistic of all rows (one program: the mean of a loss over its rows)
# walks them in steps of this many. In [128, 32] tiles, 32 lanes each computing the one
# column, it walked 94_MSELoss' 32768 row results in 256 steps: ~0.2 ms of its 2.08 ms,
# where torch.compile took 1.87 (H200).
POST_ROWS = 2048
TILE_ROWS = 64  # a column pass over at most this many rows takes them in one tile


def _b_operand(stage: StagePlan, genome: TritonGenome) -> tuple[list[str], str]:
    g, s = stage.gemm, stage.index
    if g.anchor or g.window is not None:  # no B: the B pointer is a{s}, never read
        return [f"w{s} = a{s}"], "kn"
    layout, derive = g.b_layout, ""
    k_major = genome.precision in K_MAJOR
    if g.b.startswith("self.") and not g.batched:
        if genome.weight_layout == "kn" and layout == "nk" and not k_major:
            derive, layout = ".t().contiguous()", "kn"
        elif k_major and layout == "kn":  # a K-major copy, made once and cached
            derive, layout = ".t().contiguous()", "nk"
        if genome.precision == "bf16":
            derive += ".to(torch.bfloat16)"
    elif k_major and layout == "kn":  # an input or a computed value: its K-major copy per call
        copy = "_kf_tf32rn({})" if genome.precision == "tf32rn" else "{}.contiguous()"
        return [f"w{s} = " + copy.format(f"{g.b}.transpose(-1, -2)")], "nk"
    if genome.precision == "tf32rn":  # rounded to nearest tf32: a weight once, else per call
        if g.b.startswith("self.") and not g.batched:
            made = f"lambda w: _kf_tf32rn(w{derive})"
            return [f'w{s} = self._kf_derived("_kf_w{s}", {g.b}, {made})'], layout
        return [f"w{s} = _kf_tf32rn({g.b})"], layout
    if not derive and genome.precision == "bf16" and genome.cast == "call":
        # an input: in bf16 per call, as A is (cast "tile": the kernel casts its fp32 tiles)
        return [f"w{s} = {g.b}.to(torch.bfloat16) if {g.b}.is_cuda else {g.b}"], layout
    if not derive:
        return [f"w{s} = {g.b}"], layout
    return [f'w{s} = self._kf_derived("_kf_w{s}", {g.b}, lambda w: w{derive})'], layout


def _window_args(stage: StagePlan) -> list[str]:
    """A window stage's run-time arguments `wa` (channels, the input's batch and channel
    strides, then per spatial dim its input length, stride and pooled length) and its
    constexprs `wc` (per spatial dim: kernel, stride, padding, dilation)."""
    s, w = stage.index, stage.gemm.window
    assert w is not None
    n, a = w.dims, f"a{s}"
    consts = ", ".join(
        f"W{x}{i}=w{x.lower()}{s}[{i}]" for i in range(n) for x in ("K", "S", "P", "D")
    )
    return [
        f"wa{s} = ({a}.shape[-{n + 1}], {a}.stride(0) if {a}.dim() == {n + 2} else 0, "
        f"{a}.stride(-{n + 1}), *(v for i in range(-{n}, 0) "
        f"for v in ({a}.shape[i], {a}.stride(i), po{s}[i])))",
        f"wc{s} = dict({consts})",
    ]


def _swapped_output(plan: Plan) -> bool:
    """Whether the output buffer is in the layout of an input read in place with its leading
    dims swapped: a [rows, cols] value of such a stage (Gemm.swap_of)."""
    out = plan.graph.output
    stage = plan.stage_of[out]
    return plan.kind(out) is Kind.MAT and stage >= 0 and bool(plan.stages[stage].gemm.swap_of)


def render_triton(plan: Plan, genome: TritonGenome, problem_source: str, doc: str) -> str:
    if plan.graph.low_precision:  # dots of the program's dtype: no tf32 / bf16 schemes
        genome = dataclasses.replace(genome, precision="ieee", x3="triton")
    names = Names()
    r.draw_first(plan, names)
    writers = [StageWriter(plan, st, genome, names) for st in plan.stages]
    parts = [w.lines() for w in writers]
    body = [*parts[0][0], r.groups_line(plan), *r.inner_lines(plan)]
    body += r.leaf_prep(names.tensors, swapped=names.swapped)
    body += [f"{name} = float({src})" for src, name in names.scalars.items()]
    for i, (a_lines, rest) in enumerate(parts):
        body += (a_lines if i else []) + rest
    body += r.update_lines(plan)
    body.append(r.output_line(plan, swapped=_swapped_output(plan)))
    model = model_source(problem_source)
    helpers = [TRITON_HELPERS[h] for h in TRITON_HELPERS if h in names.helpers]
    return r.render_template(
        "triton/module.py.j2",
        doc=doc,
        model=model,
        helpers=helpers,
        kernels=[k.source for w in writers for k in w.kernels],
        kernels_names=[k.name for w in writers for k in w.kernels],
        derived=any("_kf_derived" in line for line in body),
        dropout=any("_kf_dropout_mask" in line for line in body),
        sum_n=any("_kf_sum_n" in line for line in body),
        tma=any(w.tma for w in writers),
        presplit=any(w.presplit for w in writers),
        bf16=genome.precision in BF16,
        lowp=any(low_dot(plan, st) for st in plan.stages),
        many_rows=any("_KF_RPP" in line for line in body),
        narrow=any("_KF_NARROW" in line for line in body),
        post_rows=POST_ROWS if any("_KF_POST_ROWS" in line for line in body) else 0,
        tile_rows=TILE_ROWS if any("_KF_TILE_ROWS" in line for line in body) else 0,
        tf32rn=any("_kf_tf32rn(" in line for line in body),
        body="\n".join(body),
    )
