"""Usage: python scripts/search_throughput.py OUTDIR --workers 1 [--problems 01 02 ...] ...

Search throughput on a GPU machine: one `kforge search` on cuda-triton with the builtin
agent, measured from outside. All options:

    python scripts/search_throughput.py OUTDIR --workers 1 [--per-gpu 1] [--problems 01 02 ...] \
        [--lineages 1] [--generations 2] [--sizes NAME] [--policy loose] \
        [--platform cuda-triton] [--max-minutes M]

While the search runs, nvidia-smi samples every GPU's utilization twice a second (the
fraction of time a kernel was running: the GPU's busy fraction). Afterwards the search's
database gives the evaluations of the run (search steps and the winners' second
measurement), their summed durations (the evaluator actors' busy fraction), where that
time went (seconds per evaluation by phase: start, setup, build, verify, time, unseen, ...),
the host's CPU utilization over the run, and the best speedup per problem (over the faster
of eager and torch.compile). Each invocation uses a fresh cache folder (baselines, Triton
and C++ builds), so runs with 1 and 2 evaluator actors do the same work. Prints a summary
and writes OUTDIR/throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DEFAULT = ("01", "02", "03", "05", "09", "13", "16", "21")


def _sample(stop: threading.Event, samples: list[tuple[float, int, float]]) -> None:
    query = ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"]
    while not stop.is_set():
        try:
            out = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        now = time.time()
        for line in out.strip().splitlines():
            index, util = (x.strip() for x in line.split(","))
            samples.append((now, int(index), float(util)))
        stop.wait(0.5)


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, from /proc/stat (0, 0 elsewhere):
    the host's cores' utilization over the search (its build and verify pool)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _problems(prefixes: list[str]) -> list[str]:
    suite = Path(__file__).resolve().parents[1] / "problems" / "level2"
    names = sorted(p.stem for p in suite.glob("*.py"))
    return [f"level2/{next(n for n in names if n.startswith(p + '_'))}" for p in prefixes]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=0, help="0: the search's default")
    ap.add_argument("--per-gpu", type=int, default=0, help="actors sharing a GPU; 0: default")
    ap.add_argument("--problems", nargs="+", default=list(DEFAULT))
    ap.add_argument("--lineages", type=int, default=1)
    ap.add_argument("--generations", type=int, default=2)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--policy", default="loose")
    ap.add_argument("--platform", default="cuda-triton")
    ap.add_argument("--max-minutes", type=float, default=None, help="time-box the search")
    ap.add_argument(
        "--stop-after", type=float, default=None, help="seconds: then the search is stopped"
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"w{args.workers or 'auto'}" + (f"g{args.per_gpu}" if args.per_gpu > 1 else "")
    db = out / f"search-{tag}.duckdb"
    cache = tempfile.mkdtemp(prefix=f"kforge-cache-{tag}-")
    cmd = [sys.executable, "-m", "kforge_search", "search", *_problems(args.problems)]
    cmd += ["--platform", args.platform, "--db", str(db)]
    cmd += ["--workers", str(args.workers)] if args.workers else []
    cmd += ["--per-gpu", str(args.per_gpu)] if args.per_gpu else []
    cmd += ["--lineages", str(args.lineages), "--generations", str(args.generations)]
    cmd += ["--policy", args.policy, "--no-profile"]
    if args.sizes:
        cmd += ["--sizes", args.sizes]
    if args.max_minutes:  # the search stops at the first generation boundary past it
        cmd += ["--max-minutes", str(args.max_minutes)]
    samples: list[tuple[float, int, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stop, samples), daemon=True)
    sampler.start()
    started, cpu_before = time.time(), _cpu_jiffies()
    env = {**os.environ, "KFORGE_CACHE_DIR": cache}
    with open(out / f"search-{tag}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            code = proc.wait(timeout=args.stop_after)
        except subprocess.TimeoutExpired:  # stopped from outside: what it stored counts
            proc.send_signal(signal.SIGINT)  # as Ctrl-C: the CLI stops and keeps its data
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    wall = time.time() - started
    stop.set()
    sampler.join()
    summary = _summarize(db, wall, samples, args.workers, args.per_gpu)
    busy, total = (after - before for after, before in zip(_cpu_jiffies(), cpu_before, strict=True))
    summary.update(cpu_utilization=round(busy / max(total, 1), 3), cpus=os.cpu_count())
    summary.update(command=" ".join(cmd[1:]), exit_code=code)
    (out / f"throughput-{tag}.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return code


def _summarize(db: Path, wall: float, samples: list, workers: int, per_gpu: int = 1) -> dict:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    runs = con.execute(
        "SELECT id, kind, epoch(ended_at) - epoch(started_at) FROM runs ORDER BY started_at"
    ).fetchall()
    ids = [r[0] for r in runs]
    marks = ",".join("?" * len(ids)) or "''"
    if not workers and ids:  # the search's own pool sizes, as its run recorded them
        (config,) = con.execute("SELECT config FROM runs WHERE id = ?", [ids[0]]).fetchone()
        pool = next(iter(json.loads(config).get("evaluators", {}).values()), {})
        workers, per_gpu = pool.get("actors", 1), pool.get("per_gpu", 1)
    workers, per_gpu = workers or 1, per_gpu or 1
    evals, busy = con.execute(
        f"SELECT count(*), sum(duration_s) FROM evaluations WHERE run_id IN ({marks})", ids
    ).fetchone()
    best = con.execute(
        "SELECT p.name, max(least(e.speedup_eager, e.speedup_compile)) "
        "FROM evaluations e JOIN problems p ON p.id = e.problem_id "
        "WHERE e.status = 'OK' AND e.speedup_eager IS NOT NULL AND e.speedup_compile IS NOT NULL "
        "GROUP BY p.name ORDER BY p.name"
    ).fetchall()
    verified = con.execute("SELECT count(*) FROM evaluations WHERE status = 'OK'").fetchone()[0]
    phases: dict[str, float] = {}  # where the evaluators' time went, summed over evaluations
    for (text,) in con.execute(
        f"SELECT phases FROM evaluations WHERE run_id IN ({marks})", ids
    ).fetchall():
        for name, seconds in json.loads(text or "{}").items():
            phases[name] = phases.get(name, 0.0) + seconds
    gpus = sorted({i for _, i, _ in samples})
    util = {
        str(g): sum(u for _, i, u in samples if i == g)
        / max(1, sum(1 for s in samples if s[1] == g))
        for g in gpus
    }
    used = gpus[: -(-workers // per_gpu)] if gpus else []  # the GPUs the actors were given
    gpu_minutes = wall / 60 * max(len(used), 1)
    return {
        "workers": workers,
        "per_gpu": per_gpu,
        "wall_s": round(wall, 1),
        "runs": [{"kind": k, "seconds": s} for _, k, s in runs],
        "evaluations": evals,
        "verified": verified,
        "evaluations_per_gpu_minute": round(evals / gpu_minutes, 3),
        "evaluations_per_minute": round(evals / (wall / 60), 3),
        "evaluator_busy_fraction": round((busy or 0.0) / (wall * workers), 3),
        "gpu_utilization_mean_pct": {g: round(u, 1) for g, u in util.items()},
        "seconds_per_evaluation_by_phase": {
            name: round(total / max(evals, 1), 2)
            for name, total in sorted(phases.items(), key=lambda kv: -kv[1])
        },
        "best_speedup": {name: round(s, 3) for name, s in best},
        "steady": _steady(con, ids, max(len(used), 1)),
    }


def _steady(con, ids: list, gpus: int) -> dict:
    """Steady state: the evaluations that ended after every problem's first one had (the
    first of a problem pays for its reference and baselines), per GPU-minute of that window;
    the mean seconds per phase of those evaluations; the timing lane's busy fraction (the
    summed "time" phase over the window and GPUs: the exclusive device lock is held then)."""
    marks = ",".join("?" * len(ids)) or "''"
    rows = con.execute(
        f"SELECT problem_id, epoch(created_at), duration_s, phases FROM evaluations "
        f"WHERE run_id IN ({marks}) ORDER BY created_at",
        ids,
    ).fetchall()
    if not rows:
        return {}
    firsts: dict[str, float] = {}
    for problem, ended, _, _ in rows:
        firsts.setdefault(problem, ended)
    start, end = max(firsts.values()), rows[-1][1]
    later = [r for r in rows if r[1] > start]
    window = max(end - start, 1e-9)
    phases: dict[str, float] = {}
    for *_, text in later:
        for name, seconds in json.loads(text or "{}").items():
            phases[name] = phases.get(name, 0.0) + seconds
    n = max(len(later), 1)
    return {
        "window_s": round(window, 1),
        "evaluations": len(later),
        "evaluations_per_gpu_minute": round(len(later) / (window / 60 * gpus), 2),
        "timing_lane_busy_fraction": round(
            sum(v for k, v in phases.items() if k.startswith("time")) / (window * gpus), 3
        ),
        "mean_duration_s": round(sum(r[2] or 0.0 for r in later) / n, 2),
        "seconds_per_evaluation_by_phase": {
            k: round(v / n, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])
        },
    }


if __name__ == "__main__":
    sys.exit(main())
