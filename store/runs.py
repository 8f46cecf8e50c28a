"""Runs as `kforge db runs` and `kforge db show RUN` see them: a `running` run whose driver
died reads as `interrupted`, never `running` forever.

A search's driver writes its host and process id into its run row when the run starts and
beats (`runs.heartbeat_at`) every HEARTBEAT_S seconds through the writer. A run whose status
is `running` is interrupted when, on the driver's host, its process is gone, and elsewhere
when its last heartbeat (its start, for rows written before heartbeats) is older than
STALE_S. A search
that takes the database marks such runs `interrupted` in the file (`Writer.settle_runs`);
`--resume` continues them like any other.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .ids import utcnow
from .queries import _resolve
from .reader import QueryResult, Reader

HEARTBEAT_S = 5.0  # how often a search's driver beats
STALE_S = 60.0  # a running run silent this long has lost its driver


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """A process with this id exists on this host and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc: os.kill said it exists


def run_state(
    status: str,
    host: str | None,
    pid: int | None,
    heartbeat_at: datetime | None,
    started_at: datetime,
    *,
    now: datetime | None = None,
    here: str | None = None,
    alive: Callable[[int], bool] = pid_alive,
) -> str:
    """The status to show: the stored one, or `interrupted` for a running run whose driver
    is gone (its process ended on this host, or its heartbeat went stale)."""
    if status != "running":
        return status
    if host and pid and host == (here or this_host()):  # the process tells
        return "running" if alive(pid) else "interrupted"
    last = heartbeat_at or started_at
    if (now or utcnow()) - last > timedelta(seconds=STALE_S):
        return "interrupted"
    return "running"


_STATE = "status, host, pid, heartbeat_at, started_at"


def _state_of(row: dict[str, Any]) -> str:
    return run_state(row["status"], row["host"], row["pid"], row["heartbeat_at"], row["started_at"])


@dataclass(frozen=True)
class RunRow:
    id: str
    kind: str
    state: str  # the stored status, or interrupted (run_state)
    started_at: datetime
    ended_at: datetime | None  # or the last heartbeat of an interrupted run
    problems: str
    evaluations: int
    verified: int
    llm_ok: int
    llm_failed: int


def list_runs(reader: Reader, limit: int = 20) -> list[RunRow]:
    """The newest runs first, with their evaluations and LLM calls counted."""
    rows = reader.query(
        f"""SELECT r.id, r.kind, {_STATE}, r.ended_at, r.config,
            (SELECT count(*) FROM evaluations e WHERE e.run_id = r.id) AS evaluations,
            (SELECT count(*) FROM evaluations e WHERE e.run_id = r.id AND e.status = 'OK')
                AS verified,
            (SELECT count(*) FROM llm_calls c WHERE c.run_id = r.id AND c.status = 'ok')
                AS llm_ok,
            (SELECT count(*) FROM llm_calls c WHERE c.run_id = r.id AND c.status <> 'ok')
                AS llm_failed
        FROM runs r ORDER BY r.started_at DESC LIMIT ?""",
        [limit],
    ).dicts()
    return [
        RunRow(
            r["id"],
            r["kind"],
            state := _state_of(r),
            r["started_at"],
            r["ended_at"] or (r["heartbeat_at"] if state == "interrupted" else None),
            _problems(r["config"]),
            r["evaluations"],
            r["verified"],
            r["llm_ok"],
            r["llm_failed"],
        )
        for r in rows
    ]


def _problems(config: str | None) -> str:
    try:
        data = json.loads(config or "{}")
    except ValueError:
        return ""
    names = data.get("problems") or [data.get("problem") or data.get("of_run") or ""]
    return ", ".join(str(n) for n in names)


@dataclass(frozen=True)
class RunDetail:
    run: dict[str, Any]  # the row, with `state`
    statuses: QueryResult  # evaluations per status
    lineages: QueryResult  # per lineage: evaluations, verified, best speedup
    llm: QueryResult  # per lineage, role and status: calls, tokens, cost, the last error


def resolve_run(reader: Reader, ref: str) -> str:
    return _resolve(reader, "runs", ref, "`kforge db runs` lists the runs")


def run_detail(reader: Reader, ref: str) -> RunDetail:
    run_id = resolve_run(reader, ref)
    row = reader.query("SELECT * FROM runs WHERE id = ?", [run_id]).dicts()[0]
    row["state"] = _state_of(row)
    statuses = reader.query(
        "SELECT status, count(*) AS evaluations FROM evaluations WHERE run_id = ? "
        "GROUP BY status ORDER BY 2 DESC",
        [run_id],
    )
    lineages = reader.query(
        """SELECT c.lineage_id AS lineage, count(*) AS evaluations,
            count(*) FILTER (WHERE e.status = 'OK') AS verified,
            max(e.speedup_eager) AS best_x_eager
        FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
        WHERE e.run_id = ? GROUP BY 1 ORDER BY 1""",
        [run_id],
    )
    llm = reader.query(
        """SELECT lineage_id AS lineage, role, status, count(*) AS calls,
            sum(attempts) AS attempts, sum(tokens_in + tokens_out) AS tokens,
            sum(cost_usd) AS usd, round(sum(latency_s), 1) AS seconds,
            arg_max(error, created_at) AS last_error
        FROM llm_calls WHERE run_id = ? GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
        [run_id],
    )
    return RunDetail(row, statuses, lineages, llm)
