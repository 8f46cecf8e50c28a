"""A candidate's outputs handed to the oracle through CUDA IPC, not through a file.

Against a streamed reference (footprint.streamed) the oracle compares (oracle_compare.py).
Through files, a candidate's child copied each verification trial's outputs to the host and
saved them, and the oracle read them back: at 4096 x 393216 (6 GiB of float32 a trial) that
took 145 s of verification and 139 s of the timed runs' check (H200, 21_Sigmoid), before the
oracle ran out of time. On one GPU the child instead leaves its outputs where they are and
saves, per tensor, the CUDA IPC handle of its storage (torch's own, as
torch.multiprocessing passes CUDA tensors); the oracle opens them on the same device and
compares there. The child holds those tensors until the parent says it may go on (the
parent says so only once the oracle has answered).

The oracle opens only handles (the file is read with weights_only): the memory they name is
the candidate's own, as its outputs are. A tensor this cannot share (on the host, empty, or
not in torch's allocator) goes as a copy on the host, as before.
"""

from __future__ import annotations

from typing import Any

SHARED = "cuda-ipc"  # the key of a shared tensor's entry


def share(tensors: list[Any]) -> list[Any]:
    """Per tensor: its IPC entry where it is on a CUDA device and shareable, else a copy
    of it on the host. The caller keeps the tensors alive until the oracle has answered."""
    return [_entry(t.detach()) for t in tensors]


def _entry(tensor: Any) -> Any:
    if tensor.device.type != "cuda" or tensor.numel() == 0:
        return tensor.to("cpu").clone()
    try:
        (device, handle, size, offset, counter, counter_offset, event, sync) = (
            tensor.untyped_storage()._share_cuda_()
        )
    except (RuntimeError, TypeError):  # memory torch's allocator did not give
        return tensor.to("cpu").clone()
    return {
        SHARED: handle,
        "device": int(device),
        "size": int(size),
        "offset": int(offset),
        "counter": counter,
        "counter_offset": int(counter_offset),
        "event": event,
        "sync": bool(sync),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "shape": list(tensor.shape),
        "stride": list(tensor.stride()),
        "storage_offset": int(tensor.storage_offset()),
    }


def is_shared(value: Any) -> bool:
    return isinstance(value, dict) and SHARED in value


def has_shared(values: list[Any]) -> bool:
    return any(is_shared(v) for v in values)


def opened(values: list[Any]) -> list[Any]:
    """The tensors a child shared, opened in this process (the oracle's), on their device;
    host copies as they are. Raises ValueError on an entry that does not describe one."""
    return [_open(v) if is_shared(v) else v for v in values]


def _open(entry: dict[str, Any]) -> Any:
    import torch

    dtype = getattr(torch, str(entry.get("dtype")), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"a shared output of unknown dtype {entry.get('dtype')!r}")
    shape, stride = list(entry["shape"]), list(entry["stride"])
    if len(shape) != len(stride) or min([*shape, *stride, entry["storage_offset"]], default=0) < 0:
        raise ValueError(f"a shared output of shape {shape} and stride {stride}")
    last = entry["storage_offset"] + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    if (last + 1) * dtype.itemsize > int(entry["size"]):
        raise ValueError("a shared output reaches past its storage")
    torch.cuda._lazy_init()
    storage = torch.UntypedStorage._new_shared_cuda(
        int(entry["device"]),
        entry[SHARED],
        int(entry["size"]),
        int(entry["offset"]),
        entry["counter"],
        int(entry["counter_offset"]),
        entry["event"],
        bool(entry["sync"]),
    )
    tensor = torch.empty(0, dtype=dtype, device=f"cuda:{int(entry['device'])}")
    return tensor.set_(storage, int(entry["storage_offset"]), shape, stride)
