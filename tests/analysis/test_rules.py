"""The rule-based analysis on profiles whose figures are known: which bottleneck, which
suggestions with which expected gain, what the digest says; ncu's CSV read back; the
roofline/timeline PNG rendered."""

from __future__ import annotations

from kforge_search.agents.llm.analyst import parse_analysis
from kforge_search.analysis import rules
from kforge_search.analysis.plot import render
from kforge_search.analysis.work import Work
from kforge_search.evaluator import ncu
from kforge_search.evaluator.profile import KernelStat, NcuKernel, Profile, Span
from kforge_search.hardware import datasheet_peaks

H100 = datasheet_peaks("NVIDIA H100 80GB HBM3")
GEMM = Work(
    flops=2 * 1024 * 8192 * 8192, min_bytes=4 * (1024 * 8192 * 2 + 8192 * 8192), source="traced"
)


def _cuda(kernels: list[tuple[str, float]], wall_us: float, launches: float, **kw) -> Profile:
    stats = tuple(KernelStat(n, 5, us * 5, "device") for n, us in kernels)
    spans = tuple(Span(n, 10.0 * i, us, "device") for i, (n, us) in enumerate(kernels))
    return Profile("torch.profiler", "cuda", 5, wall_us, launches, stats, spans, **kw)


def test_many_short_launches_are_launch_overhead_with_a_fusion_suggestion():
    profile = _cuda([("relu", 5.0), ("add", 5.0), ("mul", 10.0)], wall_us=100.0, launches=3)
    verdict = rules.analyze(profile, Work(0.0, 4e6, "traced"), H100, "", 0.1)
    assert verdict.bottleneck == "launch-overhead"
    assert verdict.suggestions[0].title.startswith("Fuse")
    assert verdict.suggestions[0].expected_gain == "up to 5.0x"  # 20% of the call is kernels


def test_a_compute_bound_fp32_gemm_is_pointed_at_the_tensor_cores_the_policy_admits():
    # 137 GFLOP in 2.72 ms: 50 TFLOP/s at fp32, 75% of the 67 TFLOP/s peak
    profile = _cuda([("gemm", 2720.0)], wall_us=2730.0, launches=1)
    loose = rules.analyze(profile, GEMM, H100, "ieee", 2.72, ("ieee", "tf32x3", "tf32"))
    assert loose.bottleneck == "compute"
    assert loose.suggestions[0].title == "Run the GEMM on tensor cores (tf32)"
    strict = rules.analyze(profile, GEMM, H100, "ieee", 2.72, ("ieee", "tf32x3"))
    assert strict.suggestions[0].title == "Run the GEMM on tensor cores (tf32x3)"
    text = rules.digest(profile, GEMM, H100, "ieee", 2.72)
    assert "achieved 50.53 TFLOP/s, 75% of the compute peak" in text
    assert "75% of the roofline at ieee" in text and "gemm (device): 2720.0 us/call" in text


def test_a_slow_memory_bound_pass_is_told_to_move_fewer_bytes():
    # 512 MiB moved in 1 ms: 537 GB/s of 3350 -> 16% of the bandwidth roofline
    profile = _cuda([("softmax", 1000.0)], wall_us=1005.0, launches=1)
    verdict = rules.analyze(profile, Work(0.0, 2**29, "flop-counter"), H100, "", 1.0)
    assert verdict.bottleneck == "memory"
    (move,) = verdict.suggestions
    assert move.title == "Move fewer bytes" and move.expected_gain == "up to 5.3x"


def test_ncu_low_throughput_is_latency_with_the_main_stalls_named():
    metrics = (
        (rules.SM_THROUGHPUT, 20.0),
        (rules.MEM_THROUGHPUT, 30.0),
        (rules.OCCUPANCY, 12.5),
        ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 6.0),
        ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 2.0),
    )
    profile = _cuda([("gemm", 2720.0)], 2730.0, 1, ncu=(NcuKernel("gemm", metrics),))
    verdict = rules.analyze(profile, GEMM, H100, "tf32", 2.72, ("tf32",))
    assert verdict.bottleneck == "latency"
    hide = next(s for s in verdict.suggestions if s.title == "Hide latency")
    assert "occupancy 12%" in hide.detail and "long_scoreboard, barrier" in hide.detail
    assert "stalls: long_scoreboard 6.0, barrier 2.0" in rules.digest(
        profile, GEMM, H100, "tf32", 2.72
    )


def test_a_cpu_kernel_on_one_of_many_cores_is_told_to_parallelize():
    profile = Profile("launch-timer", "cpu", 5, 1000.0, 1,
                      (KernelStat("ext.gemm", 5, 4900.0, "host"),),
                      counters=(("busy_threads", 1.0),))  # fmt: skip
    verdict = rules.analyze(profile, GEMM, None, "", 1.0, cpus=8)
    assert verdict.bottleneck == "parallelism"
    assert verdict.suggestions[0].expected_gain == "up to 8.0x"


HEADER = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
          "Metric Unit", "Metric Value")  # fmt: skip


def _row(*cells: str) -> str:
    return ",".join(f'"{c}"' for c in cells)


def _metric(launch: str, kernel: str, section: str, name: str, unit: str, value: str) -> str:
    where = ("4242", "python3", "127.0.0.1", kernel, "1", "7", "(256, 1, 1)", "(132, 1, 1)")
    return _row(launch, *where, "0", "9.0", section, name, unit, value)


SOL = "GPU Speed Of Light Throughput"
REPORT = "\n".join([
    "==PROF== Connected to process 4242",
    _row(*HEADER),
    _metric("0", "_gemm_kernel", SOL, "Duration", "us", "412.35"),
    _metric("0", "_gemm_kernel", SOL, "Compute (SM) Throughput", "%", "81.20"),
    _metric("0", "_gemm_kernel", "Occupancy", "Achieved Occupancy", "%", "11.90"),
    _metric("0", "_gemm_kernel", "Launch Statistics", "Function Cache Configuration", "",
            "CachePreferNone"),
    _metric("1", "_row_norm", SOL, "Memory Throughput", "%", "1,234.5"),
])  # fmt: skip


def test_ncu_csv_is_read_per_launch_with_units_and_without_text_values():
    gemm, norm = ncu.parse(REPORT)
    assert gemm.name == "_gemm_kernel" and gemm.get("Duration [us]") == 412.35
    assert gemm.get(rules.SM_THROUGHPUT) == 81.2 and gemm.get(rules.OCCUPANCY) == 11.9
    assert len(gemm.metrics) == 3  # the cache configuration is text: left out
    assert norm.name == "_row_norm" and norm.get(rules.MEM_THROUGHPUT) == 1234.5
    assert ncu.parse("==ERROR== the profiler could not start\n") == ()
    assert "--clock-control" in ncu.command("/tmp/r.csv")


def test_the_roofline_and_timeline_render_as_a_png():
    profile = _cuda([("gemm", 2720.0), ("bias", 20.0)], wall_us=2750.0, launches=2)
    figures = rules.figures(profile, GEMM, H100, "tf32", 2.72)
    png = render(profile, GEMM, H100, figures, "01_gemm_bias_relu on cuda-triton", "tf32")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    cpu = Profile("launch-timer", "cpu", 5, 10.0, 1, timeline=(Span("ext.f", 1.0, 8.0, "host"),))
    blank = render(cpu, "work not counted: x", None, rules.figures(cpu, "x", None, "", 0.01), "t")
    assert blank.startswith(b"\x89PNG")


def test_analysis_replies_are_parsed_from_prose_and_fences_and_bad_ones_explained():
    reply = (
        'The kernel waits on memory.\n```json\n{"bottleneck": "Memory", "summary": "slow", '
        '"suggestions": [{"title": "Vectorize", "detail": "128-bit loads", '
        '"expected_gain": "1.2x"}, {"detail": "no title: dropped"}]}\n```\nGood luck.'
    )
    parsed = parse_analysis(reply)
    assert isinstance(parsed, rules.Analysis) and parsed.bottleneck == "memory"
    assert [s.title for s in parsed.suggestions] == ["Vectorize"] and parsed.agent == "llm"
    bare = parse_analysis('{"bottleneck": "compute", "summary": "", "suggestions": []}')
    assert isinstance(bare, rules.Analysis) and bare.suggestions == ()
    assert "not one of" in parse_analysis('{"bottleneck": "vibes", "suggestions": []}')
    assert parse_analysis("no idea") == "no JSON object in the reply"
