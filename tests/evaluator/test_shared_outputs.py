"""The candidate's outputs handed to the oracle as CUDA IPC handles (shared_outputs.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from kforge_search.evaluator import shared_outputs
from kforge_search.evaluator.oracle_compare import candidate_outputs


def _entry(**changes):
    entry = {
        shared_outputs.SHARED: b"\x00" * 64,
        "device": 0,
        "size": 4 * 12,
        "offset": 0,
        "counter": b"",
        "counter_offset": 0,
        "event": b"",
        "sync": False,
        "dtype": "float32",
        "shape": [3, 4],
        "stride": [4, 1],
        "storage_offset": 0,
    }
    return {**entry, **changes}


def test_host_tensors_go_as_copies_of_their_own():
    t = torch.arange(6.0).reshape(2, 3).t()
    (copy,) = shared_outputs.share([t])
    assert isinstance(copy, torch.Tensor) and torch.equal(copy, t)
    assert copy.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert not shared_outputs.has_shared([copy])


def test_the_parent_refuses_handles_and_takes_host_outputs_as_they_are():
    host = [torch.ones(2)]
    assert candidate_outputs(host, shared=False) is host
    with pytest.raises(ValueError, match="device handles to the parent"):
        candidate_outputs([_entry()], shared=False)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"dtype": "Tensor"}, "unknown dtype"),
        ({"dtype": "no_such"}, "unknown dtype"),
        ({"shape": [3, 5]}, "past its storage"),
        ({"storage_offset": 1}, "past its storage"),
        ({"stride": [4, -1]}, "shape"),
        ({"stride": [4]}, "shape"),
    ],
)
def test_an_entry_that_names_memory_beyond_its_storage_is_refused_before_it_is_opened(changes, why):
    with pytest.raises(ValueError, match=why):
        shared_outputs.opened([_entry(**changes)])


SHARER = textwrap.dedent(
    """
    import sys, torch
    from kforge_search.evaluator import shared_outputs
    big = torch.arange(40, dtype=torch.float32, device="cuda").reshape(5, 8)
    view = big[1:, 2:5].t()  # non-contiguous, offset in its storage
    torch.cuda.synchronize()
    torch.save({"outputs": shared_outputs.share([view])}, sys.argv[1])
    print("shared", flush=True)
    sys.stdin.readline()  # held until the reader is done
    """
)


@pytest.mark.gpu
def test_on_a_gpu_another_process_reads_the_outputs_where_they_are(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    path = tmp_path / "trial.pt"
    child = subprocess.Popen(
        [sys.executable, "-c", SHARER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "shared"
        saved = torch.load(path, weights_only=True)
        assert shared_outputs.has_shared(saved["outputs"])
        (got,) = candidate_outputs(saved["outputs"], shared=True)
        want = torch.arange(40, dtype=torch.float32).reshape(5, 8)[1:, 2:5].t()
        assert got.is_cuda and got.shape == want.shape and got.stride() == want.stride()
        assert torch.equal(got.cpu(), want)
        del got
    finally:
        child.communicate("done\n", timeout=60)
    assert child.returncode == 0
