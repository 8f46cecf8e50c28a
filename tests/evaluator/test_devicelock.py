"""Timed runs alone on their device: the reader-writer lock, and two evaluators sharing one."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.devicelock import JOURNAL_ENV, LOCK_DIR_ENV, DeviceLock, device_key
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.throughput import parse_journal
from tests.conftest import EXAMPLES, evaluate_chain, own_cache


def _in_thread(lock: DeviceLock, exclusive: bool, log: list[str], name: str) -> threading.Thread:
    def run() -> None:
        lock.hold(exclusive)
        log.append(name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_work_shares_the_device_and_a_waiting_timing_goes_before_new_work(tmp_path):
    r1, r2, r3, w = (DeviceLock("dev", tmp_path) for _ in range(4))
    r1.hold(False)
    r2.hold(False)  # work beside work
    log: list[str] = []
    writer = _in_thread(w, True, log, "timing")
    time.sleep(0.3)
    late = _in_thread(r3, False, log, "new work")
    time.sleep(0.3)
    assert log == []  # the timing waits for the work running; new work waits behind it
    r1.release()
    r2.release()
    writer.join(5)
    time.sleep(0.3)
    assert log == ["timing"]  # alone on the device
    w.release()
    late.join(5)
    assert log == ["timing", "new work"]
    for lock in (r1, r2, r3, w):
        lock.close()


def test_a_long_shared_hold_lets_a_waiting_timing_go_at_its_safe_point(tmp_path):
    """A baseline child compiling kinds one after another holds the device shared for long:
    between two kinds it lets a timing that waits go first, then holds shared again."""
    work, w = DeviceLock("dev", tmp_path), DeviceLock("dev", tmp_path)
    work.hold(False)
    assert not work.writer_waiting() and not work.yield_to_timing()  # nobody waits: holds on
    log: list[str] = []
    writer = _in_thread(w, True, log, "timing")
    deadline = time.monotonic() + 5
    while not work.writer_waiting() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert work.writer_waiting() and log == []  # the timing waits for the hold

    def time_then_release() -> None:
        writer.join(5)
        time.sleep(0.3)
        log.append("timed")
        w.release()

    timing = threading.Thread(target=time_then_release, daemon=True)
    timing.start()
    assert work.yield_to_timing()  # back only once the timing ended
    log.append("work again")
    assert log == ["timing", "timed", "work again"] and work.mode == "shared"
    timing.join(5)
    assert not work.writer_waiting()
    for lock in (work, w):
        lock.close()


def test_devices_have_their_own_locks(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert device_key("cuda") == "cuda-3" != device_key("cpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")
    assert device_key("cuda") == "cuda-4"


def test_two_evaluators_never_time_beside_the_others_work(tmp_path, monkeypatch):
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    platform = get_platform("cpu-triton")
    results = []

    def evaluate_twice() -> None:
        evaluator = Evaluator(EvalConfig(baselines=()))
        for _ in range(2):
            results.append(
                evaluator.evaluate(EXAMPLES / "triton/elementwise_chain.py", problem, platform)
            )
        evaluator.close()

    threads = [threading.Thread(target=evaluate_twice) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert [r.status for r in results] == [Status.OK] * 4, [r.message for r in results]
    holds = parse_journal(journal.read_text())
    assert len(holds) == len(journal.read_text().splitlines())  # every line a hold
    # when each was asked for (its wait: throughput.lane_blocked) and on which device
    assert all(h.asked is not None and h.asked <= h.start for h in holds)
    assert {h.device for h in holds} == {"cpu"}
    mine = f"{os.getpid()}:"  # the evaluators' holds; the others are their spares' warm-ups
    holders = {h.holder for h in holds if h.holder.startswith(mine)}
    assert len(holders) == 2  # one lock per evaluator
    # each says whose work it was: the problem and the child's mode
    labels = {h.label for h in holds if h.holder.startswith(mine)}
    assert f"{problem.name}:candidate" in labels, labels
    assert labels <= {f"{problem.name}:{mode}" for mode in ("candidate", "reference", "oracle")}
    spares = [h.mode for h in holds if not h.holder.startswith(mine)]
    assert spares and set(spares) == {"shared"}  # a spare's warm-up holds it shared
    exclusive = [h for h in holds if h.mode == "exclusive"]
    # each evaluator: two timings at least, and work between them
    assert all(sum(e.holder == h for e in exclusive) >= 2 for h in holders)
    assert {h.mode for h in holds} == {"shared", "exclusive"}
    for timed in exclusive:
        for other in holds:
            if other.holder != timed.holder:
                assert other.end <= timed.start or other.start >= timed.end, (timed, other)


def test_on_the_cpu_no_spare_warms_up_while_a_candidate_is_evaluated(tmp_path, monkeypatch):
    """On the CPU a spare's warm-up (an interpreter's imports) holds the lock: started beside
    the candidate, the candidate's timing waited for it (1.2 s on a 2-CPU machine). The next
    spare starts once the candidate's child has ended (pipeline._child)."""
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    # a reference of its own: its children take the spares started before the candidate's
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    evaluate_chain(EvalConfig(baselines=(), zygote=False), "cpu-triton")
    holds = parse_journal(journal.read_text())
    mine = f"{os.getpid()}:"
    candidate = [h for h in holds if h.holder.startswith(mine) and h.label.endswith(":candidate")]
    start = min(h.start for h in candidate)
    timed = max(h.end for h in candidate if h.mode == "exclusive")
    spares = [h for h in holds if not h.holder.startswith(mine)]
    assert spares  # the spares did warm up (for the unseen sizes' reference, the candidate)
    assert not [h for h in spares if h.start < timed and h.end > start], (candidate, spares)


def test_reference_shares_the_device_and_a_baseline_holds_it_alone_only_to_time(
    tmp_path, monkeypatch
):
    """The reference child times nothing and a baseline compiles and warms up first: only
    the baseline's timed runs need the device to themselves (others' work goes on meanwhile)."""
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))  # no cached baseline
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    platform = get_platform("cpu-cpp")
    evaluator = Evaluator(EvalConfig(baselines=("eager",), reduced_precision=False))
    try:
        ref = evaluator.reference(problem, platform)
        (baseline,) = evaluator.baselines(problem, platform, ref)
    finally:
        evaluator.close()
    assert baseline.ok and baseline.timing is not None and baseline.timing.runs > 0
    holds = parse_journal(journal.read_text())
    mine = [h for h in holds if h.holder.startswith(f"{os.getpid()}:")]  # no spare's
    # the reference, then the unseen sizes' (the baselines are checked there too: peers.py),
    # then the baseline: shared while it compiles and warms up, alone only for its timed runs
    assert [h.mode for h in mine] == ["shared", "shared", "shared", "exclusive", "shared"]
    assert [h.label.rsplit(":", 1)[1] for h in mine] == ["reference"] * 2 + ["baseline"] * 3


SLOW_TRIALS = """
import time

import pytest
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    time.sleep(0.2)  # a trial that takes a while (as a published-size one does)
    with open(MARK, "a") as f:  # for the test: how far the reference got
        f.write("x")
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


def test_a_timing_that_asks_during_a_reference_goes_between_its_trials(tmp_path, monkeypatch):
    """A published-size reference held the device for minutes (H200: 305 s) and every timing
    waited for all of it; now its child pauses between trials and a waiting timing goes."""
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    # no stored reference
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    path = tmp_path / "slow_trials.py"
    mark = tmp_path / "trials"
    path.write_text(SLOW_TRIALS.replace("import time", f"import time\nMARK = {str(mark)!r}"))
    problem = resolve_problem(str(path))
    platform = get_platform("cpu-cpp")
    evaluator = Evaluator(EvalConfig(baselines=()))
    timing = DeviceLock(device_key("cpu"), tmp_path / "locks")
    done: list[float] = []
    thread = threading.Thread(
        target=lambda: (evaluator.reference(problem, platform), done.append(time.time())),
        daemon=True,
    )
    try:
        thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not mark.exists() or len(mark.read_text()) < 3  # its third trial
        ):
            time.sleep(0.05)
        timing.hold(True)
        held_at = time.time()
        timing.release()
        thread.join(120)
    finally:
        timing.close()
        evaluator.close()
    assert done, "the reference did not finish"
    assert held_at < done[0] - 0.5  # the timing went while the reference still ran


def test_a_timing_that_asks_while_others_time_goes_before_their_work_after_timing(tmp_path):
    """Timings in a batch, not one per round of work: each evaluator holds the lock shared
    again right after its timed runs (the oracle's check, the unseen sizes). A timing that
    asks while another times goes before that work; before, it waited for it (H100, 8
    actors: 6.5 s for the lane and 5 s more to get the shared hold back per candidate)."""
    work, first, second, third = (DeviceLock("dev", tmp_path) for _ in range(4))
    work.hold(False)
    log: list[str] = []

    def evaluate(lock: DeviceLock, name: str) -> None:
        lock.hold(True)
        log.append(name)
        time.sleep(0.4)  # its timed runs
        lock.hold(False)  # then its work after timing
        log.append(f"{name} after")
        lock.release()

    def asks_while(name: str, other: str, lock: DeviceLock) -> None:
        while other not in log:
            time.sleep(0.01)
        evaluate(lock, name)

    threads = [threading.Thread(target=evaluate, args=(first, "t1"), daemon=True)]
    threads[0].start()
    time.sleep(0.2)
    threads.append(threading.Thread(target=asks_while, args=("t2", "t1", second), daemon=True))
    threads.append(threading.Thread(target=asks_while, args=("t3", "t2", third), daemon=True))
    for thread in threads[1:]:
        thread.start()
    time.sleep(0.2)
    assert log == []  # the timing waits for the work running
    work.release()
    for thread in threads:
        thread.join(10)
    assert log[:3] == ["t1", "t2", "t3"], log  # one after another
    assert sorted(log[3:]) == ["t1 after", "t2 after", "t3 after"], log
    for lock in (work, first, second, third):
        lock.close()


def test_a_spare_does_not_queue_behind_a_waiting_timing(tmp_path):
    """An evaluator holds the lock shared while its child (a spare still warming up) starts;
    a timing waits for that evaluator; the spare's hold must not wait for the timing's
    intent, or the three wait for each other (seen on the H100: 'start' 60-100 s)."""
    evaluator, timing, spare = (DeviceLock("dev", tmp_path) for _ in range(3))
    evaluator.hold(exclusive=False)
    timed = threading.Thread(target=timing.hold, args=(True,))
    timed.start()
    time.sleep(0.2)  # the timing now holds the intent and waits for the evaluator
    queued = threading.Thread(target=DeviceLock("dev", tmp_path).hold, args=(False,), daemon=True)
    queued.start()
    queued.join(0.5)
    assert queued.is_alive()  # a queued reader waits behind the timing ...
    spare.hold(False, queue=False)  # ... the spare's does not (this returns at once)
    assert spare.mode == "shared" and timed.is_alive()
    spare.release()
    evaluator.release()
    timed.join(5)
    assert not timed.is_alive() and timing.mode == "exclusive"
    timing.release()


def test_the_wait_for_the_timing_lane_is_a_phase_of_its_own(tmp_path, monkeypatch):
    """Another holder keeps the device busy (shared) past the candidate's verification: the
    candidate's wait for the exclusive lock is reported as `lane_wait`, not as verify."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    platform = get_platform("cpu-triton")
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False))
    other = DeviceLock(device_key("cpu"))
    try:
        evaluator.reference(problem, platform)  # before: only the candidate's time counts
        other.hold(exclusive=False)
        threading.Timer(15.0, other.release).start()
        started = time.monotonic()
        result = evaluator.evaluate(EXAMPLES / "triton/elementwise_chain.py", problem, platform)
        busy = 15.0 - (time.monotonic() - started - result.duration_s)  # the holder's share
    finally:
        evaluator.close()
        other.close()
    assert result.status is Status.OK, result.message
    phases = dict(result.phases)
    assert phases.get("lane_wait", 0.0) >= 1.0, phases
    assert phases["lane_wait"] <= busy + 0.5 and phases["verify"] < 15.0 - 1.0, phases


def test_each_gpu_is_a_timing_lane_of_its_own(tmp_path, monkeypatch):
    """N GPUs on a node: an evaluator actor sees its GPU as cuda:0 (Ray sets
    CUDA_VISIBLE_DEVICES per actor), and the lock is that GPU's: timings on two GPUs go on at
    once, two on one GPU wait for each other."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    first = device_key("cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    second = device_key("cuda")
    assert first != second
    on_one, on_other, same = (DeviceLock(k, tmp_path) for k in (first, second, second))
    on_one.hold(exclusive=True)
    on_other.hold(exclusive=True)  # another GPU's lane: at once
    waiting = threading.Thread(target=same.hold, args=(True,))
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()  # the same GPU's lane: after the timing there
    on_other.release()
    waiting.join(5)
    assert same.mode == "exclusive"
    for lock in (on_one, on_other, same):
        lock.close()


def test_a_hold_that_steps_aside_lets_a_timing_in_and_queues_behind_it_to_come_back(tmp_path):
    """A baseline child's compile is CPU work: its evaluator lets the shared hold go for it
    (step_aside), so a timing that waits goes at once, and takes it back (resume_work)
    behind that timing. An exclusive hold never steps aside."""
    compiling, timing = DeviceLock("dev", tmp_path), DeviceLock("dev", tmp_path)
    compiling.hold(exclusive=False)
    timed = threading.Thread(target=timing.hold, args=(True,))
    timed.start()
    timed.join(0.3)
    assert timed.is_alive()  # it waits for the shared hold
    compiling.step_aside()
    timed.join(5)
    assert not timed.is_alive() and timing.mode == "exclusive" and compiling.mode == ""
    back = threading.Thread(target=compiling.resume_work, daemon=True)
    back.start()
    back.join(0.3)
    assert back.is_alive()  # behind the timing
    timing.release()
    back.join(5)
    assert not back.is_alive() and compiling.mode == "shared"
    assert compiling.resume_work() is False  # held, nobody waits: nothing to do
    compiling.release()
    timing.hold(exclusive=True)
    timing.step_aside()
    assert timing.mode == "exclusive"  # the timed runs keep the device
    for lock in (compiling, timing):
        lock.close()


def test_an_oracle_started_inside_a_candidates_hold_leaves_it_held(tmp_path, monkeypatch):
    """A candidate's check starts its problem's oracle lazily, while the candidate holds
    the device shared: the oracle's child starts under that hold and leaves it as it was
    (it let it go, and the rest of the verification ran beside other evaluators' timed
    runs); started alone, the oracle's child takes and lets go of its own hold."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False, spare_child=False))
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    platform = get_platform("cpu-cpp")
    try:
        lock = evaluator._lock(platform.device_kind)
        lock.label = "theirs:candidate"
        lock.hold(exclusive=False)
        assert evaluator._oracle(problem, platform).alive
        assert lock.mode == "shared" and lock.label == "theirs:candidate"
        lock.release()
        evaluator.close_oracles()
        assert evaluator._oracle(problem, platform).alive and lock.mode == ""
    finally:
        evaluator.close()
    holds = [line.split() for line in journal.read_text().splitlines()]
    assert [h[4] for h in holds] == ["theirs:candidate", f"{problem.name}:oracle"], holds


class _Standby:
    """A standby worker's process as Spawned sees it before its job: alive, stdin unread."""

    stdin = None

    def poll(self):
        return None


def _spawned(*written: bytes, close: bool = False):
    from kforge_search.evaluator.sandbox import Spawned

    read, write = os.pipe()
    for chunk in written:
        os.write(write, chunk)
    if close:
        os.close(write)
    return Spawned(_Standby(), read, "token"), write  # type: ignore[arg-type]


def test_waiting_for_a_spares_ready_reads_that_line_only():
    """The evaluator waits for its spare's "ready" holding nothing (pipeline._child, the
    warm-up on a GPU queues behind timings: standby.warm_up); the events after stay for
    the child's reader."""
    spawned, write = _spawned(b'{"type": "ready"}\n{"type": "stage", "stage": "setup"}\n')
    assert spawned.wait_ready(5.0)
    os.close(write)
    with os.fdopen(spawned.read_fd, "rb") as rest:
        assert rest.read() == b'{"type": "stage", "stage": "setup"}\n'


@pytest.mark.parametrize(
    ("written", "close"),
    [((), False), ((b'{"type": "rea',), False), ((), True), ((b'{"type": "fail"}\n',), False)],
    ids=["silent", "cut-short", "ended", "not-ready"],
)
def test_a_spare_that_does_not_say_ready_in_time_is_not_taken(written, close):
    spawned, write = _spawned(*written, close=close)
    started = time.monotonic()
    assert not spawned.wait_ready(0.3)
    assert time.monotonic() - started < 3.0
    os.close(spawned.read_fd)
    if not close:
        os.close(write)


def test_one_at_a_time_lets_one_in_and_the_next_after_it(tmp_path):
    """A spare's CUDA context, one at a time per device (devicelock.one_at_a_time): held
    apart from the device lock, so a timing that waits can go between two of them. (flock
    holds per open file: threads of one process exclude each other as processes do.)"""
    import itertools

    from kforge_search.evaluator.devicelock import one_at_a_time

    spans: list[tuple[float, float]] = []

    def turn() -> None:
        with one_at_a_time("cuda:0", "context", tmp_path):
            start = time.time()
            time.sleep(0.2)
            spans.append((start, time.time()))

    threads = [threading.Thread(target=turn, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    with one_at_a_time("cuda:1", "context", tmp_path):  # another device's turn: its own
        pass
    lock = DeviceLock(device_key("cuda:0"), tmp_path)
    lock.hold(True)  # the device lock is not the turn's: a timing is not held up by it
    lock.close()
    for thread in threads:
        thread.join(10)
    got = sorted(spans)
    assert len(got) == 3 and all(a[1] <= b[0] for a, b in itertools.pairwise(got)), got


def test_spares_take_their_context_turns_unless_told_together(monkeypatch):
    """By default a spare's CUDA context waits for its turn (standby.warm_up takes
    one_at_a_time); $KFORGE_SPARE_CONTEXTS=together is the old way, all at once."""
    from kforge_search.evaluator.standby import SPARE_CONTEXTS_ENV, contexts_one_at_a_time

    monkeypatch.delenv(SPARE_CONTEXTS_ENV, raising=False)
    assert contexts_one_at_a_time()
    monkeypatch.setenv(SPARE_CONTEXTS_ENV, "one")
    assert contexts_one_at_a_time()
    monkeypatch.setenv(SPARE_CONTEXTS_ENV, " together ")
    assert not contexts_one_at_a_time()
