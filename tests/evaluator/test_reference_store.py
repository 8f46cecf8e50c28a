"""References computed once per node (reference_store.py): a second evaluator reads the
first one's reference from disk instead of running the reference again, a stored file that
anything but an evaluator changed is not used, and the child's file of the reference's
tensors becomes the stored one (renamed; from another file system, written from the bytes
the parent read)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kforge_search.evaluator import EvalConfig, Evaluator, Status, tensorfile
from kforge_search.evaluator import pipeline as pipeline_mod
from kforge_search.evaluator.exact import Numerics
from kforge_search.evaluator.reference import Reference
from kforge_search.evaluator.reference_store import ReferenceStore
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES, own_cache

CPU = get_platform("cpu-triton")
CHAIN = EXAMPLES / "triton/elementwise_chain.py"


def _problem(dim: int):  # sizes of this file's own: no other test stores these references
    return resolve_problem("level1/10_elementwise_chain").resized(
        overrides={"batch_size": 3, "dim": dim}
    )


def _runs(monkeypatch) -> list[str]:
    """Counts the reference children this process starts."""
    ran: list[str] = []
    real = pipeline_mod.Evaluator._run_reference

    def counted(self, problem, platform, work, keep):
        ran.append(problem.sizes_key)
        return real(self, problem, platform, work, keep)

    monkeypatch.setattr(pipeline_mod.Evaluator, "_run_reference", counted)
    return ran


def test_a_second_evaluator_reads_the_reference_the_first_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path)))
    ran = _runs(monkeypatch)
    problem = _problem(129)
    config = EvalConfig(baselines=(), check_unseen=False)
    first, second = Evaluator(config), Evaluator(config)
    try:
        ref = first.reference(problem, CPU)
        # its child's folder (its oracle's now) keeps no copy of what was stored
        (oracle,) = first._oracles.values()
        assert oracle.work.is_dir() and not list(oracle.work.glob("reference-outputs*"))
        again = second.reference(problem, CPU)
        assert ran == [problem.sizes_key]  # the second read it
        assert len(again.outputs) == len(ref.outputs) == 9
        for a, b in zip(again.outputs, ref.outputs, strict=True):
            assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        assert again.numerics.trial_ids == ref.numerics.trial_ids
        assert again.numerics.float32_error == ref.numerics.float32_error
        assert again.footprint == ref.footprint and again.per_call_ms == ref.per_call_ms
        # where the first one's time went, by part (a bench prints it); the read one: none
        parts = dict(ref.spent)
        assert {"start, waits", "setup", "float32 trials", "float64", "file", "read"} <= set(parts)
        assert all(s >= 0 for s in parts.values()) and parts["setup"] > 0, ref.spent
        assert again.spent == ()
        # the second evaluator judges candidates with it (its oracle starts when asked)
        result = second.evaluate(CHAIN, problem, CPU)
        assert result.status is Status.OK, result.message
        wrong = CHAIN.read_text().replace("y * 2.0 - 0.1", "y * 2.0 - 0.2")
        assert second.evaluate_source(wrong, problem, CPU).status is Status.INCORRECT
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("part", [".pt", ".meta"])  # its tensors, the rest of it
def test_a_stored_reference_changed_on_disk_is_computed_again(tmp_path, monkeypatch, part):
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path)))
    ran = _runs(monkeypatch)
    problem = _problem(131)
    config = EvalConfig(baselines=(), check_unseen=False)
    first = Evaluator(config)
    try:
        first.reference(problem, CPU, oracle=False)
    finally:
        first.close()
    (stored,) = (tmp_path / "references").glob(f"*{part}")
    data = bytearray(stored.read_bytes())
    data[-20] ^= 0xFF  # one byte changed: the seal no longer matches
    stored.write_bytes(bytes(data))
    second = Evaluator(config)
    try:
        second.reference(problem, CPU, oracle=False)
    finally:
        second.close()
    assert ran == [problem.sizes_key] * 2


def _child_file(folder: Path) -> tuple[Reference, tensorfile.Read]:
    """A reference and the file its child would have saved, as the parent read it."""
    torch.manual_seed(0)
    outputs, exact = [[torch.randn(4, 6)]], [[torch.randn(4, 6, dtype=torch.float64)]]
    buffers = [{"running_mean": torch.randn(6)}]
    path = folder / "reference-outputs.pt"
    tensorfile.write({"outputs": outputs, "buffers": buffers, "exact": exact}, path)
    numerics = Numerics(exact=exact, float32_error=(0.25,), magnitudes=((0.75,),))
    ref = Reference(outputs=outputs, warnings=("w",), device_name="cpu", torch_version="t",
                    per_call_ms=1.5, buffers=buffers, numerics=numerics)  # fmt: skip
    return ref, tensorfile.read(path, hashed=True)


def _same_reference(loaded: dict, ref: Reference) -> None:
    again = Reference(**loaded)
    assert torch.equal(again.outputs[0][0], ref.outputs[0][0])
    assert torch.equal(again.numerics.exact[0][0], ref.numerics.exact[0][0])
    assert torch.equal(again.buffers[0]["running_mean"], ref.buffers[0]["running_mean"])
    assert (again.numerics.float32_error, again.numerics.magnitudes) == ((0.25,), ((0.75,),))
    assert (again.warnings, again.per_call_ms, again.footprint) == (("w",), 1.5, None)


def test_the_childs_file_is_renamed_into_the_store(tmp_path):
    store = ReferenceStore(tmp_path / "references", tmp_path)
    work = tmp_path / "kforge-ref-x"  # the child's folder, on the store's file system
    work.mkdir()
    ref, read = _child_file(work)
    inode = read.path.stat().st_ino
    assert store.save("k", ref, read)
    (stored,) = (tmp_path / "references").glob("*.pt")
    assert stored.stat().st_ino == inode and not read.path.exists()  # moved, not copied
    _same_reference(store.load("k"), ref)
    assert store.load("other key") is None


def test_a_childs_file_on_another_file_system_is_written_from_the_bytes_read(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on a file system of its own")
    store = ReferenceStore(tmp_path / "references", tmp_path)
    work = shm / f"kforge-test-{os.getpid()}"
    work.mkdir()
    try:
        ref, read = _child_file(work)
        assert store.save("k", ref, read)
        (stored,) = (tmp_path / "references").glob("*.pt")
        assert stored.read_bytes() == read.path.read_bytes()
        _same_reference(store.load("k"), ref)
    finally:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()


def test_a_computed_reference_says_where_its_time_went(tmp_path, monkeypatch):
    """Reference.spent: its child's parts (a bench prints them for the time before a
    problem's first draft) and what the parent added around them."""
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path)))
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False))
    try:
        ref = evaluator.reference(_problem(131), CPU, oracle=False)
    finally:
        evaluator.close()
    names = [name for name, _ in ref.spent]
    assert names[0] == "start, waits" and names[-1] == "read", names
    assert {"setup", "float32 trials", "determinism", "float64", "time per call", "file"} <= set(
        names
    )
    assert all(s >= 0 for _, s in ref.spent) and dict(ref.spent)["setup"] > 0


def test_the_references_time_per_call_stops_at_its_budget(monkeypatch):
    """A reference whose calls are slow (a level-1 problem of 6 GiB: its inputs made and its
    outputs copied back, seconds a call) is timed for the limits over fewer calls, not all
    PER_CALL_RUNS; a fast one over all of them."""
    import time as time_mod
    from types import SimpleNamespace

    from kforge_search.evaluator import inputs, limits

    asked: list[int] = []
    monkeypatch.setattr(inputs, "timing_inputs",
                        lambda module, job, run: asked.append(run) or [run])  # fmt: skip
    monkeypatch.setattr(limits, "PER_CALL_BUDGET_S", 0.3)

    def slow(inputs):
        time_mod.sleep(0.2)
        return [torch.zeros(2)]

    job = SimpleNamespace(timed_runs=50)
    ms = limits.measure_per_call(slow, None, job)
    assert asked == [0, 1] and 190 <= ms <= 400
    asked.clear()
    limits.measure_per_call(lambda inputs: [torch.zeros(2)], None, job)
    assert asked == list(range(limits.PER_CALL_RUNS))
