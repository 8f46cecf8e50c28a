"""The file-system sandbox itself (evaluator/landlock.py).

A Landlock restriction cannot be undone, so each test that restricts runs in a process of its
own; the others use the module's seam (an `abi` standing in for the kernel's) and never
restrict the test process.
"""

from __future__ import annotations

import ctypes
import errno
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kforge_search.evaluator import landlock
from kforge_search.evaluator.outcome import failure_result, with_child_warning
from kforge_search.evaluator.result import EvalResult, Status

ABI = landlock.probe()[0]
needs_landlock = pytest.mark.skipif(
    ABI < landlock.MIN_ABI, reason=f"Landlock ABI {ABI} here: {landlock.probe()[1]}"
)

# Runs in a child: restricts itself to argv[1] and tries each operation; prints one JSON
# object, operation -> "ok" or the errno's name.
PROBE = r"""
import json, os, signal, socket, subprocess, sys
from kforge_search.evaluator import landlock

inside, outside = sys.argv[1], sys.argv[2]
victim = os.path.join(outside, "victim.txt")
confinement = landlock.restrict([inside], landlock.device_grants())

def write(path, mode="a"):
    with open(path, mode) as f:
        f.write("x")

def tcp():
    with socket.socket() as s:
        s.settimeout(1)
        s.connect(("127.0.0.1", 9))

def shell(command):
    if subprocess.run(["sh", "-c", command], capture_output=True).returncode:
        raise PermissionError(13, "the shell's redirection failed")

def signal_parent():
    os.kill(os.getppid(), 0)

trials = {
    "write_inside": lambda: write(os.path.join(inside, "ok.txt")),
    "mkdir_inside": lambda: os.makedirs(os.path.join(inside, "a", "b")),
    "rename_inside": lambda: (write(os.path.join(inside, "a", "f")),
                              os.rename(os.path.join(inside, "a", "f"),
                                        os.path.join(inside, "f"))),
    "dev_null": lambda: write("/dev/null"),
    "write_outside": lambda: write(victim),
    "create_outside": lambda: write(os.path.join(outside, "new.txt"), "w"),
    "truncate_outside": lambda: os.truncate(victim, 0),
    "link_outside": lambda: os.link(victim, os.path.join(inside, "hard")),
    "rename_onto_outside": lambda: os.rename(os.path.join(inside, "f"), victim),
    "unlink_outside": lambda: os.unlink(victim),
    "child_write_outside": lambda: shell(f"echo x >> {victim}"),
    "child_write_inside": lambda: shell(f"echo x >> {inside}/child.txt"),
    "tcp_connect": tcp,
    "signal_parent": signal_parent,
}
seen = {"enforced": confinement.enforced, "abi": confinement.abi}
for name, trial in trials.items():
    try:
        trial()
        seen[name] = "ok"
    except OSError as exc:
        seen[name] = __import__("errno").errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(seen))
"""


def _probe(inside: Path, outside: Path) -> dict[str, object]:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(inside), str(outside)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@needs_landlock
def test_writes_only_inside_and_its_children_too(tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("original\n")

    seen = _probe(inside, outside)

    assert seen["enforced"] is True and seen["abi"] == ABI
    for allowed in ("write_inside", "mkdir_inside", "rename_inside", "dev_null",
                    "child_write_inside"):  # fmt: skip
        assert seen[allowed] == "ok", (allowed, seen)
    for refused in ("write_outside", "create_outside", "truncate_outside",
                    "rename_onto_outside", "unlink_outside", "child_write_outside"):  # fmt: skip
        assert seen[refused] == "EACCES", (refused, seen)
    assert seen["link_outside"] == "EXDEV", seen  # a link across the sandbox's boundary
    if ABI >= 4:
        assert seen["tcp_connect"] == "EACCES", seen
    if ABI >= 6:
        assert seen["signal_parent"] == "EPERM", seen
    assert (outside / "victim.txt").read_text() == "original\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (inside / "ok.txt").read_text() == "x" and (inside / "child.txt").exists()


def _result(status: Status) -> EvalResult:
    return EvalResult(status=status, message="", stage="static_check", problem_id="p",
                      problem_name="p", platform="cpu-triton", policy="strict",
                      candidate_hash="h")  # fmt: skip


def test_without_landlock_the_result_says_why():
    none = landlock.restrict(["/tmp"], abi=0)
    assert none == landlock.Confinement(enforced=False, abi=0, reason=none.reason)
    assert "no Landlock" in none.reason
    old = landlock.restrict(["/tmp"], abi=2)
    assert not old.enforced and old.abi == 2 and "truncate" in old.reason
    assert "sandbox off" in old.describe()


def test_a_child_without_landlock_fails_closed_as_infra_error(tmp_path, monkeypatch):
    monkeypatch.delenv(landlock.OPT_OUT_ENV, raising=False)
    sent: list[tuple[str, dict[str, object]]] = []
    folder = tmp_path / "cache" / "triton"  # made before the restriction, as the child does

    go_on = landlock.confine_child(
        "candidate", [str(folder)], lambda kind, **fields: sent.append((kind, fields)), abi=0
    )

    assert go_on is False and folder.is_dir()
    ((kind, event),) = sent
    assert kind == "fail" and event["status"] == "INFRA_ERROR"
    message = str(event["message"])
    assert "Landlock" in message and "lsm" in message and "KFORGE_UNSANDBOXED=1" in message
    result = failure_result(_result(Status.INFRA_ERROR), {"type": kind, **event}, "start", None)
    assert result.status is Status.INFRA_ERROR and "Landlock" in result.message


def test_the_opt_out_runs_unconfined_and_warns(tmp_path, monkeypatch):
    monkeypatch.setenv(landlock.OPT_OUT_ENV, "1")
    sent: list[tuple[str, dict[str, object]]] = []

    go_on = landlock.confine_child(
        "candidate", [str(tmp_path)], lambda kind, **fields: sent.append((kind, fields)), abi=0
    )

    assert go_on is True
    assert sent == [("warning", {"message": landlock.OFF_WARNING})]
    base = replace(_result(Status.OK), warnings=("earlier",))
    warned = with_child_warning(base, {"type": "warning", **sent[0][1]})
    assert warned.warnings == ("earlier", landlock.OFF_WARNING)
    assert "sandbox" in landlock.OFF_WARNING and landlock.OPT_OUT_ENV in landlock.OFF_WARNING


def test_write_rights_grow_with_the_abi():
    assert landlock.write_rights(1) & (landlock.FS_REFER | landlock.FS_TRUNCATE) == 0
    assert landlock.write_rights(2) & landlock.FS_REFER
    assert landlock.write_rights(3) & landlock.FS_TRUNCATE
    assert not landlock.write_rights(4) & landlock.FS_IOCTL_DEV
    assert landlock.write_rights(5) & landlock.FS_IOCTL_DEV
    reads = landlock.FS_EXECUTE | landlock.FS_READ_FILE | landlock.FS_READ_DIR
    assert all(landlock.write_rights(abi) & reads == 0 for abi in range(1, 9))


def test_devices_granted_are_the_gpus_and_pseudo_devices_only(tmp_path):
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "sda", "kvm", "shm"):
        (tmp_path / name).touch()
    (tmp_path / "nvidia-caps").mkdir()

    grants = {g.path: g.rights for g in landlock.device_grants(str(tmp_path))}

    gpu = {str(tmp_path / n) for n in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-caps")}
    assert gpu <= set(grants) and "/dev/null" in grants
    assert str(tmp_path / "sda") not in grants and str(tmp_path / "kvm") not in grants
    assert all(grants[p] & landlock.FS_IOCTL_DEV for p in gpu)  # CUDA drives them by ioctl
    assert grants[str(tmp_path / "shm")] == landlock.SHM_RIGHTS


def test_struct_layouts_match_the_kernel_uapi():
    attr, rule = landlock._RulesetAttr, landlock._PathBeneathAttr
    assert ctypes.sizeof(attr) == 24
    assert (attr.handled_access_net.offset, attr.scoped.offset) == (8, 16)
    assert ctypes.sizeof(rule) == 12 and rule.parent_fd.offset == 8  # packed
    assert errno.EXDEV == 18  # the errno the adversarial tests expect for a refused link


HIDE = r"""
import json, os, sys
from kforge_search.evaluator import landlock

inside, hidden, beside = sys.argv[1], sys.argv[2], sys.argv[3]
confinement = landlock.restrict([inside], landlock.device_grants(), hidden=[hidden])
seen = {"enforced": confinement.enforced}
for name, path in (("hidden", os.path.join(hidden, "key")), ("beside", beside),
                   ("python", sys.executable), ("inside", os.path.join(inside, "mine"))):
    try:
        with open(path, "rb") as f:
            f.read(1)
        seen[name] = "ok"
    except OSError as exc:
        seen[name] = __import__("errno").errorcode.get(exc.errno, str(exc.errno))
seen["listing"] = sorted(os.listdir(hidden))
print(json.dumps(seen))
"""


@needs_landlock
def test_a_hidden_folder_cannot_be_read_and_the_rest_can(tmp_path):
    """The evaluators' key (cache_seal.py) lives in a folder the candidate may not read."""
    inside, hidden = tmp_path / "work", tmp_path / "cache" / "private"
    inside.mkdir()
    hidden.mkdir(parents=True)
    (hidden / "key").write_bytes(b"k" * 32)
    (inside / "mine").write_text("x")
    beside = tmp_path / "cache" / "baselines.json"
    beside.write_text("{}")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", HIDE, str(inside), str(hidden), str(beside)],
        capture_output=True, text=True, cwd=root, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["enforced"] is True
    assert seen["hidden"] == "EACCES", seen
    assert seen["beside"] == seen["python"] == seen["inside"] == "ok", seen
    assert seen["listing"] == ["key"]  # names may be listed, not read
