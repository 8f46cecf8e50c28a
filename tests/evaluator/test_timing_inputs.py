"""Timing inputs: drawn on the job's device, seeded, the same for every child that draws them."""

from __future__ import annotations

import dataclasses
import types

import torch

from kforge_search.evaluator.inputs import timing_inputs
from kforge_search.evaluator.job import Job
from kforge_search.problem import resolve_problem


def _problem_module() -> types.SimpleNamespace:
    def get_inputs():
        return [torch.randn(4, 3), torch.empty(2, device="cpu"), torch.get_default_device().type]

    return types.SimpleNamespace(get_inputs=get_inputs)


def _job(device: str) -> Job:
    return Job(mode="candidate", problem=resolve_problem("level2/01_gemm_bias_relu", size_set="ci"),
               platform="x", device=device, timing_method="wall", timing_meaningful=True,
               trials=1, seed=5, warmup=0, timed_runs=1, outputs_path="", ext_cache="")  # fmt: skip


def test_inputs_are_drawn_on_the_jobs_device_and_seeded():
    # "meta" stands in for an accelerator: the factory call runs there, not on the CPU and
    # then copied; a tensor the problem puts on the CPU explicitly is moved afterwards
    drawn = timing_inputs(_problem_module(), _job("meta"), 3)
    assert drawn[2] == "meta"  # where get_inputs() ran
    assert [x.device.type for x in drawn[:2]] == ["meta", "meta"]
    assert torch.get_default_device().type == "cpu"  # the default is back afterwards


def test_the_same_run_draws_the_same_values_and_runs_differ():
    module, job = _problem_module(), _job("cpu")
    first, again, other = (timing_inputs(module, job, r)[0] for r in (2, 2, 3))
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert not torch.equal(first, timing_inputs(module, dataclasses.replace(job, seed=6), 2)[0])


def test_no_burst_call_gets_a_buffer_an_earlier_call_saw(monkeypatch):
    """A burst asked again (timed_check.WALL_ATTEMPTS) must not hand the candidate buffers
    at addresses it saw in an earlier burst or a sizing call: one that does its real work
    only on buffers it has not seen (30b_work_on_fresh_buffers.py) would be cheap there.
    The caller keeps every burst's inputs alive (`held`), so none is recycled."""
    from kforge_search.evaluator import timed_runs

    def get_inputs():
        return [torch.randn(64, 64)]

    module, job = types.SimpleNamespace(get_inputs=get_inputs), _job("cpu")
    monkeypatch.setattr(timed_runs, "read_command", lambda: ["go"])
    seen: list[int] = []

    def call(x):
        seen.append(x.data_ptr())
        return x * 2.0

    held: list = []
    for draw in (11, 12, 13):  # three bursts, as a slow first one is asked again
        outs = timed_runs.run_burst(call, module, job, draw, 4, 1 << 30, lambda *a, **k: None,
                                    lambda: None, held)  # fmt: skip
        assert len(outs) == 4
    assert len(seen) == 3 * 5 and len(set(seen)) == len(seen)  # a sizing call + 4 each
    assert len(held) == 15


def test_bursts_hold_no_more_than_the_budget_beyond_the_set_they_call_on(monkeypatch):
    """Inputs larger than the budget (45_AvgPool2D: a 16 GiB set against 4 GiB): on the
    H100 two bursts held a sizing set and a call set each, 64 GiB, and the oracle found no
    room for its own set. Each burst now keeps only what fits the budget beside the set it
    calls on."""
    from kforge_search.evaluator import inputs, timed_runs

    def get_inputs():
        return [torch.randn(256, 256)]  # 256 KiB a set

    module, job = types.SimpleNamespace(get_inputs=get_inputs), _job("cpu")
    monkeypatch.setattr(timed_runs, "read_command", lambda: ["go"])
    # no address handed before (other tests' draws in this process): no set drawn again
    monkeypatch.setattr(inputs, "_HANDED", set())
    set_bytes = 256 * 256 * 4
    budget = set_bytes // 2  # one set is over it
    held: list = []
    for draw in (21, 22, 23):
        outs = timed_runs.run_burst(lambda x: x + 1.0, module, job, draw, 4, budget,
                                    lambda *a, **k: None, lambda: None, held)  # fmt: skip
        assert len(outs) == 1  # one call: no room for more
        assert sum(inputs.set_bytes(s) for s in held) == set_bytes  # its own set, no other
    roomy: list = []
    monkeypatch.setattr(inputs, "_HANDED", set())  # the sets above are gone: nothing drawn again
    for draw in (21, 22):  # within the budget every set is kept, as before
        timed_runs.run_burst(lambda x: x + 1.0, module, job, draw, 2, 64 * set_bytes,
                             lambda *a, **k: None, lambda: None, roomy)  # fmt: skip
    assert len(roomy) == 2 * 3


def test_no_burst_input_sits_where_an_input_the_candidate_was_handed_did(monkeypatch):
    """The timed runs' inputs are freed run by run and the allocator hands their memory
    out again: a burst drawn afterwards could get those addresses (30b_work_on_fresh_buffers
    is cheap there), as allocation order decided. Each burst input set lands at an address
    no input had before; the copies of its outputs are made before the parent's clock
    starts (a 6 GiB clone inside it took the allocator's slow path on a crowded GPU)."""
    from kforge_search.evaluator import inputs, timed_runs

    def get_inputs():
        return [torch.randn(64, 64)]

    module, job = types.SimpleNamespace(get_inputs=get_inputs), _job("cpu")
    monkeypatch.setattr(inputs, "_HANDED", set())
    # the allocator's recycling, made certain: the first two draws of each burst set come
    # back at addresses the candidate was handed (a timed run's inputs, freed and reused)
    recycled = [timing_inputs(module, job, run, 5) for run in range(3)]
    handed = {x[0].data_ptr() for x in recycled}
    draw = inputs._timing_inputs
    draws: list[int] = []

    def drawn_where_handed(module, job, run, seed):
        draws.append(run)
        if seed == 11 and run < 4 and draws.count(run) <= 2:
            return [recycled[(run + draws.count(run)) % 3][0]]
        return draw(module, job, run, seed)

    monkeypatch.setattr(inputs, "_timing_inputs", drawn_where_handed)
    events: list[str] = []
    monkeypatch.setattr(timed_runs, "read_command", lambda: events.append("go") or ["go"])
    made = []
    empty = timed_runs._empty

    def made_before_go(shapes):
        made.append(list(events))
        return empty(shapes)

    monkeypatch.setattr(timed_runs, "_empty", made_before_go)
    seen: list[int] = []
    mine = torch.empty(64, 64)

    def call(x):  # one buffer of its own, every call
        seen.append(x.data_ptr())
        return mine.copy_(x * 2.0)

    held: list = []
    outs = timed_runs.run_burst(call, module, job, 11, 4, 1 << 30, lambda *a, **k: None,
                                lambda: None, held)  # fmt: skip
    assert len(seen) == 5 and not set(seen[1:]) & handed  # seen[0]: the sizing call
    assert [draws.count(run) for run in range(4)] == [3] * 4  # two landed where handed
    assert made == [[]] * 4  # every copy's memory before "go"
    assert len({o[0].data_ptr() for o in outs} | {mine.data_ptr()}) == 5  # each its own
    expected = [draw(module, job, run, 11)[0] * 2.0 for run in range(4)]
    for out, want in zip(outs, expected, strict=True):
        torch.testing.assert_close(out[0], want)


def test_a_bursts_copies_of_its_outputs_are_touched_before_the_clock_starts(monkeypatch):
    """On the host, the memory the burst copies each call's outputs into is made and its
    pages touched before "burst-ready": untouched, each copy paid its first-touch page
    faults on the parent's clock (the timed runs reuse warm heap memory), and a right
    cpu-cpp seed of 19_ReLU (25 MB outputs) took 53-58 ms a call against 2.7-7.2 claimed on
    the 2-CPU VM: REJECTED. Counted here as this process's minor page faults between
    "burst-ready" and "burst", with a call that writes into a buffer of its own."""
    import resource

    from kforge_search.evaluator import inputs, timed_runs

    def get_inputs():
        return [torch.randn(1024, 1024)]  # 4 MiB: 1024 pages an output

    module, job = types.SimpleNamespace(get_inputs=get_inputs), _job("cpu")
    monkeypatch.setattr(inputs, "_HANDED", set())
    monkeypatch.setattr(timed_runs, "read_command", lambda: ["go"])
    mine = torch.zeros(1024, 1024)
    faults: dict[str, int] = {}

    def send(kind, **_):
        faults[kind] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    outs = timed_runs.run_burst(lambda x: torch.mul(x, 2.0, out=mine), module, job, 31, 4,
                                1 << 30, send, lambda: None, [])  # fmt: skip
    assert len(outs) == 4
    # untouched copies: ~4 x 1024 faults in the burst; touched beforehand: next to none
    assert faults["burst"] - faults["burst-ready"] < 512, faults
