"""Reliability bench (issue 21): nothing lost, nothing left behind, every failure said.

Part 1: EVALS evaluations drawn at random (with replacement, in random order) from the
adversarial suite, the fault suites and honest kernels on the CPU platforms: the C++ cases
on cpu-cpp, the Triton ones on the cpu-triton interpreter, each against the status its test
expects. After each: no process of the evaluator's other than its idle spare (found by a
marker in their environment, anywhere on the machine). The bench process's RSS (the
evaluator's parent: reference outputs, caches) at start, after the first evaluation, at end.

Part 2: SEARCHES `kforge search` runs on cpu-cpp, each killed with SIGKILL at a random
moment, then resumed (`--resume`): what was alive below the CLI (or marked) must be gone
within 20 s; results lost per kill (evaluations the CLI had reported, "N evaluated", that
the database does not hold); the resumed search's exit code and replayed evaluations.

    KFORGE_CACHE_DIR=.kforge-cache .venv/bin/python scripts/reliability_bench.py \
        --evals 200 --searches 5 --seed 1 --out /tmp/reliability
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kforge_search.evaluator import EvalConfig, Evaluator, Status  # noqa: E402
from kforge_search.platforms import get_platform  # noqa: E402
from kforge_search.problem import resolve_problem  # noqa: E402
from kforge_search.procs.tree import command_line, descendants, marked, processes  # noqa: E402

MARK = "KFORGE_RELIABILITY"
CHAIN = "level1/10_elementwise_chain"
SEARCH_PROBLEMS = ["level2/01_gemm_bias_relu", "level1/10_elementwise_chain"]
ANY_OF = frozenset


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    platform: str
    problem: str
    expected: frozenset[Status]
    policy: str = "strict"
    size_set: str = "ci"


def cases(folder: Path) -> list[Case]:
    """Every CPU case of the test suites, with the statuses their tests expect."""
    from tests.adversarial.test_adversarial import CANDIDATES
    from tests.adversarial.test_adversarial import CASES as ADVERSARIAL
    from tests.conftest import BROKEN, EXAMPLES
    from tests.evaluator.test_broken import CASES as BROKEN_CASES
    from tests.evaluator.test_faults import FAULTS, HANGING_COMPILE, TEMPLATE
    from tests.evaluator.test_honest import CASES as HONEST

    found = [
        Case(
            f"adversarial/{c.file}",
            CANDIDATES / c.file,
            c.platform,
            c.problem,
            c.statuses,
            c.policy,
            c.size_set,
        )
        for c in ADVERSARIAL
        if not c.platform.startswith("cuda")
    ]
    for name, (before, inside, status, _) in FAULTS.items():
        path = folder / f"fault_{name}.py"
        path.write_text(TEMPLATE.format(before=before, inside=inside))
        found.append(Case(f"fault/{name}", path, "cpu-triton", CHAIN, ANY_OF({status})))
    hang = folder / "fault_compile_hang.py"
    hang.write_text(HANGING_COMPILE)
    found.append(Case("fault/compile_hang", hang, "cpu-cpp", CHAIN, ANY_OF({Status.TIMEOUT})))
    found += [
        Case(f"broken/{cand}", BROKEN / cand, plat, CHAIN, ANY_OF({status}))
        for plat, cand, status, _ in BROKEN_CASES
    ]
    leftovers = ROOT / "tests" / "fixtures" / "leftovers"
    found.append(
        Case(
            "leftover/cpp_fork",
            leftovers / "cpp_fork.py",
            "cpu-cpp",
            CHAIN,
            ANY_OF({Status.REJECTED}),
        )
    )
    found.append(
        Case(
            "leftover/python_double_fork",
            leftovers / "python_double_fork.py",
            "cpu-triton",
            CHAIN,
            ANY_OF({Status.OK, Status.REJECTED}),
        )
    )
    found += [
        Case(f"honest/{cand}", EXAMPLES / cand, plat, prob, ANY_OF({Status.OK}))
        for plat, cand, prob in HONEST
    ]
    return found


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def leftovers(token: str, evaluators: dict[str, Evaluator]) -> list[str]:
    spare = [p for e in evaluators.values() for p in e.helper_pids()]
    allowed = {*spare, *(p for s in spare for p in descendants(s))}
    return [f"{p}: {command_line(p)[:120]}" for p in marked(MARK, token) if p not in allowed]


def evaluations(count: int, rng: random.Random, args: argparse.Namespace) -> dict[str, Any]:
    token = uuid.uuid4().hex
    os.environ[MARK] = token  # every process the evaluators start carries it
    config = EvalConfig(
        baselines=(),
        verify_timeout_s=args.verify_timeout,
        build_timeout_s=args.build_timeout,
        memory_limit_mb=2048,
    )
    evaluators: dict[str, Evaluator] = {}
    rows, start_rss, first_rss = [], rss_mb(), 0.0
    with tempfile.TemporaryDirectory(prefix="kforge-reliability-") as tmp:
        pool = cases(Path(tmp))
        for i in range(count):
            case = rng.choice(pool)
            evaluator = evaluators.setdefault(
                case.policy, Evaluator(EvalConfig(**{**vars(config), "policy": case.policy}))
            )
            started = time.monotonic()
            result = evaluator.evaluate(
                case.path,
                resolve_problem(case.problem, size_set=case.size_set),
                get_platform(case.platform),
            )
            left = leftovers(token, evaluators)
            rows.append(
                {
                    "case": case.name,
                    "platform": case.platform,
                    "status": result.status.value,
                    "stage": result.stage,
                    "expected": sorted(s.value for s in case.expected),
                    "as_expected": result.status in case.expected,
                    "seconds": round(time.monotonic() - started, 2),
                    "leftovers": left,
                    "limits": dict(result.limits.stages),
                    "phases": dict(result.phases),
                }
            )
            first_rss = first_rss or rss_mb()
            mark = "ok " if rows[-1]["as_expected"] and not left else "BAD"
            print(
                f"{mark} {i + 1:3d}/{count} {case.name} ({case.platform}): "
                f"{result.status.value} in {rows[-1]['seconds']} s"
                + (f"; LEFT {left}" if left else ""),
                flush=True,
            )
        end_rss = rss_mb()
        for evaluator in evaluators.values():
            evaluator.close()
    del os.environ[MARK]
    return {
        "evaluations": len(rows),
        "as_expected": sum(r["as_expected"] for r in rows),
        "unexpected": [r for r in rows if not r["as_expected"]],
        "with_leftovers": sum(bool(r["leftovers"]) for r in rows),
        "leftovers_after_close": [f"{p}: {command_line(p)[:120]}" for p in marked(MARK, token)],
        "rss_mb": {
            "start": round(start_rss, 1),
            "after_first": round(first_rss, 1),
            "end": round(end_rss, 1),
        },
        "by_status": _count(r["status"] for r in rows),
        "by_platform": _count(r["platform"] for r in rows),
        "seconds": round(sum(r["seconds"] for r in rows), 1),
        "rows": rows,
    }


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))


class Cli:
    """`python -m kforge_search ARGS` with a marker; its output read as it comes, and every
    process below it noted (pid and start time) twice a second."""

    def __init__(self, args: list[str], token: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kforge_search", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            start_new_session=True,
            env={**os.environ, MARK: token, "PYTHONUNBUFFERED": "1"},
        )
        self.token, self.lines, self.seen = token, [], {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def watch(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.proc.poll() is None:
            procs = processes()
            self.seen |= {p: procs[p].start for p in descendants(self.proc.pid, procs)}
            time.sleep(0.5)

    def evaluated(self) -> int:
        counts = re.findall(r"\((\d+) evaluated", "".join(self.lines))
        return int(counts[-1]) if counts else 0

    def left(self, wait_s: float) -> list[str]:
        deadline = time.monotonic() + wait_s
        while True:
            procs = processes()
            alive = {p for p, st in self.seen.items() if p in procs and procs[p].start == st}
            alive |= set(marked(MARK, self.token, procs))
            alive = {p for p in alive if procs.get(p) and procs[p].state != "Z"}
            if not alive or time.monotonic() > deadline:
                return [f"{p}: {command_line(p)[:120]}" for p in sorted(alive)]
            time.sleep(0.2)


def _db_rows(db: Path) -> tuple[list[tuple[str, str]], dict[str, int]]:
    from kforge_search.store.reader import Reader

    if not db.exists():
        return [], {}
    with Reader.open(db) as reader:
        runs = reader.query(
            "SELECT id, status FROM runs WHERE kind = 'search' ORDER BY started_at"
        ).rows
        counts = reader.query("SELECT run_id, count(*) FROM evaluations GROUP BY run_id").rows
    return [(r[0], r[1]) for r in runs], {r[0]: r[1] for r in counts}


def searches(count: int, rng: random.Random, args: argparse.Namespace) -> list[dict[str, Any]]:
    done = []
    for i in range(count):
        db = Path(tempfile.mkdtemp(prefix="kforge-reliability-db-")) / "k.duckdb"
        base = ["--platform", "cpu-cpp", "--sizes", "ci", "--lineages", "2"]
        base += ["--generations", str(args.generations), "--db", str(db)]
        token = uuid.uuid4().hex
        kill_at = rng.uniform(args.kill_min, args.kill_max)
        cli = Cli(["search", *SEARCH_PROBLEMS, *base], token)
        cli.watch(kill_at)
        killed = cli.proc.poll() is None
        cli.proc.kill()
        cli.proc.wait()
        after_kill = cli.left(wait_s=20)
        reported = cli.evaluated()
        runs, counts = _db_rows(db)
        run_id = runs[-1][0] if runs else ""
        row: dict[str, Any] = {
            "kill_at_s": round(kill_at, 1),
            "killed": killed,
            "reported_evaluated": reported,
            "recorded": counts.get(run_id, 0),
            "lost": max(0, reported - counts.get(run_id, 0)),
            "processes_seen": len(cli.seen),
            "left_after_kill": after_kill,
            "run": run_id,
            "output_tail": "".join(cli.lines[-4:])[-500:],
        }
        if run_id:
            again = Cli(
                [
                    "search",
                    "--resume",
                    run_id,
                    "--generations",
                    str(args.generations),
                    "--db",
                    str(db),
                ],
                uuid.uuid4().hex,
            )
            again.watch(args.resume_timeout)
            code = again.proc.wait(timeout=60) if again.proc.poll() is None else again.proc.poll()
            output = "".join(again.lines)
            replayed = re.search(r"(\d+) evaluations replayed", output)
            runs, counts = _db_rows(db)
            row |= {
                "resume_exit": code,
                "replayed": int(replayed[1]) if replayed else 0,
                "left_after_resume": again.left(wait_s=20),
                "runs_after": runs,
                "resume_tail": output[-600:] if code else "",
            }
        print(f"search {i + 1}/{count}: {json.dumps(row)[:900]}", flush=True)
        done.append(row)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evals", type=int, default=200)
    parser.add_argument("--searches", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--verify-timeout",
        type=float,
        default=15.0,
        help="the configured verify limit (cpu-triton's hangs wait for it)",
    )
    parser.add_argument(
        "--build-timeout",
        type=float,
        default=90.0,
        help="the build limit (each compile hang waits for it)",
    )
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--kill-min", type=float, default=20.0)
    parser.add_argument("--kill-max", type=float, default=150.0)
    parser.add_argument("--resume-timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("reliability"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    if args.evals:
        report["evaluations"] = evaluations(args.evals, rng, args)
    if args.searches:
        report["searches"] = searches(args.searches, rng, args)
    (args.out / "reliability.json").write_text(json.dumps(report, indent=1, default=str))
    summary = {k: v for k, v in report.get("evaluations", {}).items() if k != "rows"}
    print(json.dumps({"evaluations": summary, "searches": report.get("searches")}, indent=1))
    print(f"written: {args.out / 'reliability.json'}")


if __name__ == "__main__":
    main()
