"""CPU time by part (procs/cpu_parts.py): real processes that name themselves and spin, an
evaluator child's channel renaming its process by stage and compile, and the throughput's
per-evaluation figure from ticks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kforge_search.procs import cpu_parts
from kforge_search.search.throughput import Tick
from kforge_search.search.throughput import cpu_parts as parts_per_evaluation

SPIN = textwrap.dedent(
    """
    import sys, time
    from kforge_search.procs.cpu_parts import name_self
    name_self(sys.argv[1])
    print("named", flush=True)
    end = time.process_time() + float(sys.argv[2])
    while time.process_time() < end:
        pass
    print("spun", flush=True)
    sys.stdin.readline()  # stay (and stay seen) until the test has sampled
    """
)


def _spinner(name: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SPIN, name, str(seconds)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "named"
    return proc


def test_a_named_process_cpu_goes_to_its_name() -> None:
    busy_name, idle_name = (f"kf.t.{os.urandom(4).hex()}" for _ in range(2))  # ours alone
    parts = cpu_parts.Parts()
    parts.sample()
    busy, idle = _spinner(busy_name, 0.6), _spinner(idle_name, 0.0)
    try:
        for proc in (busy, idle):  # the spin is done (however busy the machine is)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "spun"
        seconds = parts.sample()
    finally:
        for proc in (busy, idle):
            proc.communicate("\n")
    assert seconds.get(busy_name, 0.0) >= 0.55
    assert seconds.get(idle_name, 0.0) < 0.3  # an interpreter's start, no spin


def test_what_a_process_is() -> None:
    assert cpu_parts.kind("kf.cand.compile", "python -m x") == "kf.cand.compile"
    assert cpu_parts.kind("ray::Evaluator", "ray::EvaluatorActor.evaluate") == "ray::EvaluatorActor"
    assert cpu_parts.kind("ray::IDLE", "ray::IDLE") == "ray::IDLE"
    assert cpu_parts.kind("ptxas", "/x/ptxas -arch sm_90") == "compilers"
    assert cpu_parts.kind("raylet", "/x/raylet --node") == "ray runtime"
    assert cpu_parts.kind("python", "python -m kforge_search search") == "kforge"
    assert cpu_parts.kind("bash", "bash -c true") == "other"
    assert cpu_parts.child_name("candidate", "time-burst") == "kf.cand.time-bu"  # 15 bytes
    assert cpu_parts.child_name("ncu", "setup") == "kf.ncu.setup"


def test_a_child_channel_names_its_process_by_stage_and_compile(tmp_path) -> None:
    script = textwrap.dedent(
        """
        import os
        from kforge_search.evaluator.channel import Channel
        read, write = os.pipe()
        comm = lambda: open("/proc/self/comm").read().strip()
        channel = Channel(write, "candidate")
        channel.stage("verify")
        seen = [comm()]
        channel.send("compiling", on=True)
        seen.append(comm())
        channel.send("compiling", on=False)
        seen.append(comm())
        print(",".join(seen))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=tmp_path, env={**os.environ})  # fmt: skip
    assert out.stdout.strip() == "kf.cand.verify,kf.cand.compile,kf.cand.verify"


def test_cpu_seconds_per_evaluation_by_part_from_ticks() -> None:
    ticks = [
        Tick(0.0, 0, 1000, (), (("kf.cand.verify", 1.0),), hz=100),
        Tick(10.0, 500, 2000, (), (("kf.cand.verify", 2.0), ("compilers", 1.0)), hz=100),
        Tick(20.0, 1300, 3000, (), (("kf.cand.verify", 5.0), ("compilers", 2.0)), hz=100),
    ]
    # [0, 20] over 2 evaluations: verify 4 s, compilers 2 s, the host 13 s: 7 s unseen
    assert parts_per_evaluation(ticks, 0.0, 20.0, 2) == pytest.approx(
        {"unseen": 3.5, "kf.cand.verify": 2.0, "compilers": 1.0}
    )
    assert list(parts_per_evaluation(ticks, 0.0, 20.0, 2)) == [
        "unseen",
        "kf.cand.verify",
        "compilers",
    ]  # the largest first
    assert parts_per_evaluation(ticks, 10.0, 20.0, 1) == pytest.approx(
        {"kf.cand.verify": 3.0, "compilers": 1.0, "unseen": 4.0}
    )
    assert parts_per_evaluation(ticks, 0.0, 20.0, 0) == {}
    assert parts_per_evaluation([Tick(0.0, 0, 1), Tick(1.0, 1, 2)], 0.0, 1.0, 1) == {}
