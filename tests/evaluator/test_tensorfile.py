"""tensorfile.py: a reference's tensors written once and read back as views of one buffer,
hashed as they are written and read (the reference store's seal covers those bytes)."""

from __future__ import annotations

import hashlib
import io

import pytest
import torch

from kforge_search.evaluator import tensorfile


def _value() -> dict:
    torch.manual_seed(0)
    return {
        "outputs": [[torch.randn(5, 7).t(), None], [torch.empty(0, 3)]],  # transposed, empty
        "buffers": [{"running_mean": torch.randn(3), "num_batches_tracked": torch.tensor(2)}],
        "exact": [[torch.randn(7, 5, dtype=torch.float64), torch.randn(4, 6)[:, ::2]]],  # gaps
        "odd": (torch.tensor([True, False]), torch.randn(3, dtype=torch.bfloat16), "note", 1.5),
        "overlapping": [torch.randn(3).expand(2, 3), (1, 2)],
    }


def _same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert a == b


def test_a_value_comes_back_as_views_of_the_bytes_read_and_hashed(tmp_path):
    value = _value()
    digest = tensorfile.write(value, tmp_path / "t", hashed=True)
    assert digest == hashlib.sha256((tmp_path / "t").read_bytes()).digest()
    read = tensorfile.read(tmp_path / "t", hashed=True)
    assert read.digest == digest and read.path == tmp_path / "t"
    data = read.data
    back = tensorfile.parse(data)
    _same(value, back)
    assert back["outputs"][0][0].stride() == (1, 7)  # a dense layout is kept as it was
    start, end = data.data_ptr(), data.data_ptr() + data.numel()
    for t in (back["outputs"][0][0], back["exact"][0][0], back["buffers"][0]["running_mean"]):
        assert start <= t.data_ptr() < end  # no copy: a view of what was read
        assert t.data_ptr() % tensorfile.ALIGN == start % tensorfile.ALIGN
    # each a storage of its own: saved together (float32 beside float64), or alone
    together, alone = io.BytesIO(), io.BytesIO()
    torch.save([back["outputs"], back["exact"]], together)
    torch.save(back["buffers"][0]["running_mean"], alone)
    assert len(alone.getvalue()) < 2000 < data.numel()
    assert tensorfile.write(value, tmp_path / "u") == b""  # unhashed: none taken
    assert tensorfile.read(tmp_path / "u").digest == b""


def test_a_file_cut_short_or_grown_is_refused(tmp_path):
    tensorfile.write(_value(), tmp_path / "t")
    whole = (tmp_path / "t").read_bytes()
    for broken in (whole[:-1], whole + b"\0", b"not a tensor file at all"):
        (tmp_path / "b").write_bytes(broken)
        with pytest.raises(ValueError):
            tensorfile.load(tmp_path / "b")
