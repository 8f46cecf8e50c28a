"""`kforge bench --gpus N`: one bench per GPU of this node, each a process of its own on its
shard of the suite (`--shard I/N`, `CUDA_VISIBLE_DEVICES` naming its one GPU: its own device
room and its own timing lane), then one table of all their rows in OUT, as `--merge` makes
it. Two benches on one GPU share its timing lane honestly but not its memory, each counting
only its own jobs (4 x H200, level 1: device OOMs in their children): one bench per GPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GRACE_S = 60.0  # after Ctrl-C: each shard drops its problems in flight and saves its rows


@dataclass(frozen=True)
class Shard:
    index: int
    gpu: str  # its process's CUDA_VISIBLE_DEVICES
    out: Path  # its own --out: OUT/gpuI


def gpus_for(count: int, visible: str | None, present: int) -> list[str]:
    """The GPUs of `count` shards: the first `count` that CUDA_VISIBLE_DEVICES names where it
    is set, else 0 .. count-1 of the `present` ones. ValueError says what to do where there
    are fewer."""
    names = [g.strip() for g in visible.split(",") if g.strip()] if visible else []
    have = names or [str(i) for i in range(present)]
    if count < 2:
        raise ValueError(f"--gpus {count}: needs 2 or more (one GPU is a plain bench)")
    if len(have) < count:
        where = f"CUDA_VISIBLE_DEVICES={visible}" if names else f"{present} GPU(s) present"
        raise ValueError(f"--gpus {count}: {where}; give --gpus {len(have)} or fewer")
    return have[:count]


def shards_of(out: Path, gpus: Sequence[str]) -> list[Shard]:
    return [Shard(i, gpu, out / f"gpu{i}") for i, gpu in enumerate(gpus)]


def shard_command(common: Sequence[str], shard: Shard, count: int) -> list[str]:
    """A shard's own bench: the common arguments, its part of the suite and its folder."""
    bench = [sys.executable, "-m", "kforge_search", "bench", *common]
    return [*bench, "--shard", f"{shard.index}/{count}", "--out", str(shard.out)]


def merge_command(common: Sequence[str], shards: Sequence[Shard], out: Path) -> list[str]:
    """One table of the shards' rows in `out` (nothing runs: bench --merge); a shard that
    wrote no bench.json (it failed as it started) adds none: its problems are NOT_RUN."""
    merged = [
        a for s in shards if (s.out / "bench.json").is_file() for a in ("--merge", str(s.out))
    ]
    return [sys.executable, "-m", "kforge_search", "bench", *common, *merged, "--out", str(out)]


def run_shards(common: Sequence[str], shards: Sequence[Shard], echo: Callable[[str], None]) -> bool:
    """Every shard's bench at once, each line it prints echoed as `[gpuI] line` and kept in
    OUT/gpuI.log. Ctrl-C goes on to each (it keeps its finished rows and drops the problems
    in flight, as a bench does), and they are waited for. True when they were interrupted."""
    procs, readers = [], []
    for shard in shards:
        shard.out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": shard.gpu, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            shard_command(common, shard, len(shards)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C reaches this process alone first
        )
        log = shard.out.parent / f"gpu{shard.index}.log"
        reader = threading.Thread(target=_relay, args=(proc, log, f"[gpu{shard.index}] ", echo))
        reader.start()
        procs.append(proc)
        readers.append(reader)
    interrupted = False
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for reader in readers:
        reader.join()
    return interrupted


def _relay(
    proc: subprocess.Popen[str], log: Path, prefix: str, echo: Callable[[str], None]
) -> None:
    assert proc.stdout is not None
    with log.open("w") as f:
        for line in proc.stdout:
            f.write(line)
            f.flush()
            echo(prefix + line.rstrip("\n"))


def bench_on_gpus(
    common: Sequence[str],
    merge_common: Sequence[str],
    gpus: Sequence[str],
    out: Path,
    echo: Callable[[str], None],
) -> int:
    """The shards' benches, then their merge into `out` (its table printed as asked in
    `merge_common`). Returns the exit status: the merge's, or 130 after Ctrl-C (each shard's
    rows kept: the same command with --resume runs the rest)."""
    shards = shards_of(out, gpus)
    interrupted = run_shards(common, shards, echo)
    if not any((s.out / "bench.json").is_file() for s in shards):
        echo(f"no GPU's bench wrote a table: see {out}/gpu*.log")
        return 130 if interrupted else 1
    merged = subprocess.run(merge_command(merge_common, shards, out), check=False)
    if interrupted:
        echo(f"interrupted: each GPU's finished rows are kept in {out}/gpuI; the same command "
             "with --resume runs the others")  # fmt: skip
        return 130
    return merged.returncode


def bench_argv(
    suite: str, platform: str, policy: str, budget: int, sizes: str | None,
    overrides: list[str] | None, match: str | None, seed: int, screen: int, resume: bool,
    rest_of: str | None, jobs: int,
) -> list[str]:  # fmt: skip
    """The arguments each GPU's bench shares, as `kforge bench` had them."""
    argv = [suite, "--platform", platform, "--policy", policy, "--budget", str(budget)]
    argv += ["--seed", str(seed), "--screen", str(screen), "--jobs", str(jobs)]
    argv += [*(["--sizes", sizes] if sizes else []), *(["--match", match] if match else [])]
    argv += [a for o in overrides or [] for a in ("--set", o)]
    return argv + (["--resume"] if resume else []) + (["--rest-of", rest_of] if rest_of else [])


def on_gpus(
    count: int,
    plat: Any,
    out: str,
    fmt: str,
    argv: list[str],
    echo: Callable[[str], None],
) -> None:
    """`kforge bench --gpus COUNT`: refused where it cannot run (a platform off CUDA, fewer
    GPUs), else a bench per GPU and their merge; exits as they did."""
    import typer

    from kforge_search.cli.common import fail

    if plat.device_kind != "cuda":
        fail(f"--gpus is for CUDA platforms; {plat.name} runs on {plat.device_kind}",
             "leave out --gpus (--jobs runs problems side by side)")  # fmt: skip
    import torch

    try:
        gpus = gpus_for(count, os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())
    except ValueError as exc:
        fail(str(exc))
    merge_argv = [a for a in argv if a != "--resume"] + ["--format", fmt]  # (runs nothing)
    code = bench_on_gpus(argv, merge_argv, gpus, Path(out), echo)
    if code:
        raise typer.Exit(code)
