"""The candidate's file-system sandbox: Linux Landlock, set up through ctypes.

A candidate's child (candidate and ncu modes) restricts itself, before any candidate code
runs, so that it and every process it starts (ninja, compilers) can write only beneath its
writable folders (its work folder and the build caches) and to a few devices (/dev/null and
the like, the NVIDIA devices CUDA opens, /dev/shm). Reads and execution stay allowed
everywhere: the candidate needs Python, headers and compilers. Where the kernel knows them
(Landlock ABI >= 4, >= 6), TCP bind/connect is refused too, and signals and abstract Unix
sockets cannot reach processes outside the sandbox.

Landlock is an unprivileged Linux security module (kernel >= 5.13; this module needs ABI 3,
Linux >= 6.2, the first that also confines truncate(2)). A restriction cannot be undone: a
process keeps it, and passes it on to its children. Without Landlock the child refuses to
run the candidate (INFRA_ERROR), unless KFORGE_UNSANDBOXED=1 says to run without it: every
result then carries a warning. See docs/evaluator.md, "File-system sandbox (Landlock)".

Landlock cannot confine chmod, chown, utime or extended attributes (kernel documentation,
include/uapi/linux/landlock.h); the Python audit hook (guards.WorldGuard) sees those calls
from Python only. Before ABI 8 (Linux 7.0: LANDLOCK_RESTRICT_SELF_TSYNC) the restriction
holds for the calling thread and the threads and processes it starts later, not for threads
that already run (a spare worker's: OpenBLAS's pool, CUDA's); Confinement.threads counts them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

OPT_OUT_ENV = "KFORGE_UNSANDBOXED"  # "1": run candidates without the sandbox, knowingly
MIN_ABI = 3  # truncate(2) is confined from ABI 3 on (Linux 6.2)

# syscall numbers: the same on every architecture (the unified table, Linux 5.13)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8: every thread of the process, not only the caller
PR_SET_NO_NEW_PRIVS = 38

# include/uapi/linux/landlock.h: file-system access rights
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2: link or rename into another directory
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5: ioctl(2) on a device opened after the restriction
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# the rights that change the file system, by the ABI that introduced them (reads and
# execution are not handled: allowed everywhere)
_WRITE_RIGHTS_BY_ABI = (
    (
        1,
        FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR
        | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM,
    ),
    (2, FS_REFER),
    (3, FS_TRUNCATE),
    (5, FS_IOCTL_DEV),
)  # fmt: skip
# the rights a rule on a file (not a directory) may carry
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

DEVICE_RIGHTS = FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV  # open for writing, and ioctl
SHM_RIGHTS = FS_WRITE_FILE | FS_TRUNCATE | FS_MAKE_REG | FS_REMOVE_FILE  # POSIX shm, semaphores
PSEUDO_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
GPU_DEVICE_PREFIXES = ("nvidia", "dxg")  # /dev/nvidia*, /dev/nvidia-caps/ (and WSL's /dev/dxg)
NCU_LOCK = "/tmp/nsight-compute-lock"  # Nsight Compute's lock, taken in the profiled process


def write_rights(abi: int) -> int:
    """The write-ish access rights Landlock ABI `abi` knows."""
    rights = 0
    for since, bits in _WRITE_RIGHTS_BY_ABI:
        if abi >= since:
            rights |= bits
    return rights


@dataclass(frozen=True)
class Grant:
    """Access rights beneath one path (a folder: everything beneath; a file: itself)."""

    path: str
    rights: int


@dataclass(frozen=True)
class Confinement:
    """What restrict() did: enforced, or why not."""

    enforced: bool
    abi: int  # the kernel's Landlock ABI; 0 where Landlock is absent or off
    reason: str = ""  # why it is not enforced
    handled_fs: int = 0  # the file-system rights denied except beneath the grants
    handled_net: int = 0  # TCP rights denied everywhere
    scoped: int = 0  # signals / abstract Unix sockets kept inside the sandbox
    granted: tuple[str, ...] = ()  # the paths whose grants took effect
    skipped: tuple[str, ...] = ()  # grants that could not be added ("path: why")
    threads: int = 1  # threads of the process when it was restricted
    all_threads: bool = False  # ABI >= 8: they all were (TSYNC); else the caller only

    def describe(self) -> str:
        if not self.enforced:
            return f"file-system sandbox off: {self.reason}"
        outside = "" if self.all_threads or self.threads == 1 else (
            f"; {self.threads - 1} earlier thread(s) not confined (Landlock ABI < 8)"
        )  # fmt: skip
        return (
            f"Landlock ABI {self.abi}: writes only beneath {', '.join(self.granted)}"
            f"{'; TCP refused' if self.handled_net else ''}"
            f"{'; signals and abstract sockets scoped' if self.scoped else ''}{outside}"
        )


def unavailable(abi: int, reason: str) -> Confinement:
    return Confinement(enforced=False, abi=abi, reason=reason)


class _RulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr (the prefix the kernel is told of is what is used)."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),  # ABI 1
        ("handled_access_net", ctypes.c_uint64),  # ABI 4
        ("scoped", ctypes.c_uint64),  # ABI 6
    )


class _PathBeneathAttr(ctypes.Structure):
    """struct landlock_path_beneath_attr: packed, 12 bytes."""

    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


assert ctypes.sizeof(_RulesetAttr) == 24 and ctypes.sizeof(_PathBeneathAttr) == 12


class _Kernel:
    """The three Landlock system calls and prctl, through libc's syscall(2)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._prctl = libc.prctl
        self._prctl.restype = ctypes.c_int

    def _call(self, number: int, *args: int | ctypes.c_void_p) -> int:
        ctypes.set_errno(0)
        wide = [a if isinstance(a, ctypes.c_void_p) else ctypes.c_long(a) for a in args]
        result = self._syscall(ctypes.c_long(number), *wide)
        if result < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return int(result)

    def abi(self) -> int:
        return self._call(SYS_CREATE_RULESET, ctypes.c_void_p(None), 0, CREATE_RULESET_VERSION)

    def create_ruleset(self, attr: _RulesetAttr, size: int) -> int:
        return self._call(SYS_CREATE_RULESET, ctypes.c_void_p(ctypes.addressof(attr)), size, 0)

    def add_path_rule(self, ruleset: int, rule: _PathBeneathAttr) -> None:
        pointer = ctypes.c_void_p(ctypes.addressof(rule))
        self._call(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, pointer, 0)

    def restrict_self(self, ruleset: int, flags: int) -> None:
        self._call(SYS_RESTRICT_SELF, ruleset, flags)

    def no_new_privs(self) -> None:
        ctypes.set_errno(0)
        if self._prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:  # fmt: skip
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


def probe() -> tuple[int, str]:
    """The kernel's Landlock ABI version, or 0 and why there is none."""
    try:
        return _Kernel().abi(), ""
    except OSError as exc:
        why = {
            errno.ENOSYS: "this kernel has no Landlock system calls (Linux < 5.13, or built "
            "without CONFIG_SECURITY_LANDLOCK)",
            errno.EOPNOTSUPP: "Landlock is built into this kernel but not enabled: it is "
            "missing from the boot-time LSM list (e.g. lsm=landlock,lockdown,yama,"
            "integrity,apparmor,bpf on the kernel command line)",
            errno.EPERM: "the Landlock system calls are refused (EPERM): a seccomp filter "
            "(a container runtime's profile?) blocks them",
        }.get(exc.errno or 0, f"the Landlock probe failed: {exc}")
        return 0, why


def device_grants(dev: str = "/dev") -> list[Grant]:
    """Writing and ioctl on the pseudo devices and on the GPU's devices (CUDA opens
    /dev/nvidiactl, /dev/nvidia<N>, /dev/nvidia-uvm read-write and drives them by ioctl;
    /dev/nvidia-caps/ under MIG), and plain files in /dev/shm. Nothing else under /dev: as
    root (capabilities dropped, the uid still owns /dev/sda) a disk stays out of reach."""
    grants = [Grant(p, DEVICE_RIGHTS) for p in PSEUDO_DEVICES]
    try:
        names = sorted(os.listdir(dev))
    except OSError:
        names = []
    grants += [
        Grant(os.path.join(dev, n), DEVICE_RIGHTS)
        for n in names
        if n.startswith(GPU_DEVICE_PREFIXES)
    ]
    grants.append(Grant(os.path.join(dev, "shm"), SHM_RIGHTS))
    return grants


READ_RIGHTS = FS_READ_FILE | FS_EXECUTE  # reading a file, running a program


def read_grants(hidden: Iterable[str]) -> list[Grant]:
    """Reading and running everywhere except beneath the `hidden` folders: along the path
    from / to each, every other entry of each folder on the way gets the right (a folder's
    grant covers what is beneath it), the hidden folder none. Listing names stays allowed.
    Entries made later in a folder on the way are not readable."""
    roots = [os.path.realpath(h) for h in hidden if os.path.exists(h)]
    on_way = {"/"}
    for root in roots:
        parts = root.strip("/").split("/")
        on_way |= {"/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)}
    grants = []
    for folder in sorted(p for p in on_way if p not in roots and os.path.isdir(p)):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in sorted(names):
            path = os.path.join(folder, name)
            if path in on_way or path in roots:
                continue
            # a grant follows a symlink: one to a folder on the way (or beneath a hidden
            # one) would grant what is hidden (pytest's "pytest-current" is one)
            target = os.path.realpath(path)
            if target in on_way or any(target.startswith(r + os.sep) for r in roots):
                continue
            grants.append(Grant(path, READ_RIGHTS))
    return grants


def restrict(
    writable: Iterable[str],
    extra: Sequence[Grant] = (),
    *,
    network: bool = True,
    scopes: bool = True,
    abi: int | None = None,
    hidden: Sequence[str] = (),
) -> Confinement:
    """Restrict this process (irreversibly) to writing beneath `writable` (every write
    right) and the `extra` grants. `network`: refuse TCP bind/connect (ABI >= 4); `scopes`:
    no signals or abstract Unix sockets to processes outside (ABI >= 6); `hidden`: folders
    it may not read (read_grants). `abi` stands in for the kernel's version (a test's seam:
    0 is a kernel without Landlock)."""
    if abi is None:
        abi, why = probe()
        if abi == 0:
            return unavailable(0, why)
    if abi < 1:
        return unavailable(abi, "this kernel has no Landlock")
    if abi < MIN_ABI:
        return unavailable(
            abi,
            f"Landlock ABI {abi} is too old: truncate(2) is confined from ABI {MIN_ABI} on "
            "(Linux 6.2)",
        )
    handled_fs = write_rights(abi)
    hides = [h for h in hidden if os.path.exists(h)]
    if hides:
        handled_fs |= READ_RIGHTS
        extra = [*extra, *read_grants(hides)]
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if network and abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scopes and abi >= 6 else 0
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    size = 24 if scoped else 16 if handled_net else 8  # the prefix of the struct in use
    grants = [Grant(p, handled_fs) for p in writable] + list(extra)
    threads = len(os.listdir("/proc/self/task"))
    kernel = _Kernel()
    try:
        ruleset = kernel.create_ruleset(attr, size)
    except OSError as exc:
        return unavailable(abi, f"landlock_create_ruleset failed: {exc}")
    try:
        granted, skipped = _add_grants(kernel, ruleset, grants, handled_fs)
        kernel.no_new_privs()
        flags = RESTRICT_SELF_TSYNC if abi >= 8 else 0
        kernel.restrict_self(ruleset, flags)
    except OSError as exc:
        return unavailable(abi, f"landlock_restrict_self failed: {exc}")
    finally:
        os.close(ruleset)
    return Confinement(
        enforced=True,
        abi=abi,
        handled_fs=handled_fs,
        handled_net=handled_net,
        scoped=scoped,
        granted=tuple(granted),
        skipped=tuple(skipped),
        threads=threads,
        all_threads=abi >= 8,
    )


def _add_grants(
    kernel: _Kernel, ruleset: int, grants: Iterable[Grant], handled: int
) -> tuple[list[str], list[str]]:
    """Add each grant that can be (its path exists); a missing one only takes rights away."""
    granted, skipped = [], []
    for grant in grants:
        try:
            fd = os.open(grant.path, os.O_PATH | os.O_CLOEXEC)
        except OSError as exc:
            skipped.append(f"{grant.path}: {exc.strerror}")
            continue
        try:
            rights = grant.rights & handled
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                rights &= _FILE_RIGHTS
            if rights:
                kernel.add_path_rule(ruleset, _PathBeneathAttr(rights, fd))
                granted.append(grant.path)
        except OSError as exc:
            skipped.append(f"{grant.path}: {exc.strerror}")
        finally:
            os.close(fd)
    return granted, skipped


# -- the evaluator's child ------------------------------------------------------------------

OFF_WARNING = (
    f"the candidate ran without its file-system sandbox ({OPT_OUT_ENV}=1): writes outside "
    "its folders by native code were not prevented"
)


def unavailable_message(confinement: Confinement) -> str:
    return (
        f"the candidate's file-system sandbox (Landlock) is unavailable: {confinement.reason}. "
        "Candidates do not run without it. Run the evaluator on Linux >= 6.2 with Landlock "
        "enabled (CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the LSM list: see "
        f"/sys/kernel/security/lsm), or set {OPT_OUT_ENV}=1 to run candidates without it "
        "knowingly (every result then carries a warning)."
    )


def child_grants(mode: str) -> list[Grant]:
    """What a candidate's child may write besides its writable folders."""
    grants = device_grants()
    if mode == "ncu":
        grants.append(Grant(NCU_LOCK, FS_WRITE_FILE | FS_TRUNCATE))
    return grants


def confine_child(
    mode: str,
    writable: Sequence[str],
    send: Callable[..., None],
    abi: int | None = None,
    hidden: Sequence[str] = (),
) -> bool:
    """The worker's step before any candidate code: restrict to `writable` (created where
    missing) and the devices. False: unavailable, a "fail" event (INFRA_ERROR) said why and
    the candidate must not run. The opt-out sends a "warning" event instead. `abi` and
    `hidden` (folders it may not read: the evaluators' key, cache_seal.py): as restrict's.

    ncu mode keeps TCP and the scopes: Nsight Compute's injection in the profiled process
    talks to the ncu front end, outside the sandbox (only after the candidate passed its
    own, fully restricted, run)."""
    if os.environ.get(OPT_OUT_ENV) == "1":
        send("warning", message=OFF_WARNING)
        return True
    for folder in writable:  # a folder made later would lie outside the sandbox
        with contextlib.suppress(OSError):
            os.makedirs(folder, exist_ok=True)
    full = mode != "ncu"
    confinement = restrict(
        writable, child_grants(mode), network=full, scopes=full, abi=abi, hidden=hidden
    )
    if not confinement.enforced:
        send("fail", status="INFRA_ERROR", message=unavailable_message(confinement))
        return False
    return True
