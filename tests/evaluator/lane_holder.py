"""One process that times on a GPU, for tests/evaluator/test_gpu_lanes.py:

    python -m tests.evaluator.lane_holder DEVICE NAME FOLDER COUNT MEET WAIT_S

It takes the device lock of DEVICE (a torch device string, seen through this process's
CUDA_VISIBLE_DEVICES) exclusively, as the evaluator does to time (devicelock.device_key),
once all COUNT holders of the test have started. While it holds the lock its flag
FOLDER/held-NAME exists, and it waits until it has seen the flags of MEET others (or WAIT_S
has passed); where MEET is every other holder, until all have. It prints the names it saw
(holders that timed beside it) as one JSON list.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kforge_search.evaluator.devicelock import DeviceLock, device_key

POLL_S = 0.01
START_WAIT_S = 60.0  # for the other holders to start (a loaded machine starts them slowly)


def _others_held(folder: Path, name: str) -> list[str]:
    flags = folder.glob("held-*")
    return sorted(p.name.removeprefix("held-") for p in flags if p.name != f"held-{name}")


def main(device: str, name: str, folder: Path, count: int, meet: int, wait_s: float) -> list[str]:
    lock = DeviceLock(device_key(device), folder / "locks")
    (folder / f"started-{name}").touch()
    deadline = time.monotonic() + START_WAIT_S
    while len(list(folder.glob("started-*"))) < count and time.monotonic() < deadline:
        time.sleep(POLL_S)
    lock.hold(exclusive=True)
    flag = folder / f"held-{name}"
    flag.touch()
    seen: set[str] = set()
    deadline = time.monotonic() + wait_s
    while len(seen) < meet and time.monotonic() < deadline:
        seen.update(_others_held(folder, name))
        time.sleep(POLL_S)
    if meet == count - 1:  # every holder meets every other: none lets go before the last
        (folder / f"done-{name}").touch()  # has met it (a late starter found gone ones)
        while len(list(folder.glob("done-*"))) < count and time.monotonic() < deadline:
            time.sleep(POLL_S)
    flag.unlink()  # before letting go: a flag exists only while its holder times
    lock.close()
    return sorted(seen)


if __name__ == "__main__":
    device, name, folder, count, meet, wait_s = sys.argv[1:7]
    print(json.dumps(main(device, name, Path(folder), int(count), int(meet), float(wait_s))))
