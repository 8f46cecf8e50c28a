"""The binary check over built extensions (rules in evaluator/symbols.py).

Inside the candidate's process: build.py's load_inline wrapper checks each extension it
builds, and `sweep()` checks every shared object mapped into the process from a folder the
candidate can write to (an extension loaded by other means: importlib, ctypes, a second
load_inline under another wrapper). worker.py turns a denied import into REJECTED
`native:denied-symbol`, naming each symbol.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kforge_search.evaluator import elf, symbols

REASON = "native:denied-symbol"
MAX_NAMED = 8  # denied symbols named in a message
# the system libraries whose exports a C import may bind to (libpython is matched by name)
SYSTEM_LIBRARY = re.compile(
    r"(libc|libm|libmvec|libpthread|librt|libdl|libgcc_s|libstdc\+\+|libgomp|libiomp5|libomp|"
    r"libcudart|ld-linux[-\w]*)(-[0-9a-f]{8})?\.so(\.\d+)*$"
)
TRUSTED_ROOTS = ("/lib", "/lib64", "/usr/", "/opt/", sys.base_prefix, sys.prefix)
ADVICE = (
    "write the computation yourself: allocation (torch::empty*), tensor metadata, data "
    "pointers, at::parallel_for, OpenMP, libm and the CUDA runtime's launch API are fine"
)


@dataclass(frozen=True)
class Denied:
    symbol: str  # as imported (mangled)
    readable: str  # demangled enough to read: at::_ops::mm::call
    why: str


@dataclass(frozen=True)
class NativeReport:
    """The verdict on one shared object's imports."""

    path: str
    imports: int
    denied: tuple[Denied, ...]
    seconds: float
    error: str = ""  # the file could not be read as ELF

    @property
    def ok(self) -> bool:
        return not self.denied and not self.error

    def message(self) -> str:
        name = os.path.basename(self.path)
        if self.error:
            return f"the native extension {name} could not be checked ({self.error})"
        named = "; ".join(f"{d.readable} ({d.why})" for d in self.denied[:MAX_NAMED])
        more = len(self.denied) - MAX_NAMED
        extra = f"; and {more} more" if more > 0 else ""
        return f"the native extension {name} imports library compute: {named}{extra}"


def process_libraries(untrusted: Iterable[str] = ()) -> list[str]:
    """Paths of the system libraries (libc, libm, libstdc++, libgomp, ...) mapped into this
    process, from trusted locations only; [] where /proc/self/maps cannot be read."""
    skip = tuple(os.path.realpath(p) + os.sep for p in untrusted)
    found = []
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    mapped = dict.fromkeys(f[5] for f in (line.split(None, 5) for line in lines) if len(f) == 6)
    for name in mapped:
        if not name.startswith("/") or not SYSTEM_LIBRARY.match(os.path.basename(name)):
            continue
        path = os.path.realpath(name)
        if path not in found and path.startswith(TRUSTED_ROOTS) and not path.startswith(skip):
            found.append(path)
    return found


def system_exports(
    untrusted: Iterable[str] = (), libraries: Iterable[str] | None = None
) -> frozenset[str] | None:
    """Names the process's system libraries (or `libraries`) export; None where they cannot
    be found."""
    names: set[str] = set()
    for path in process_libraries(untrusted) if libraries is None else libraries:
        try:
            names.update(s.name for s in elf.read_dynamic(path).symbols if s.defined)
        except (OSError, elf.ElfError):
            continue
    return frozenset(names) if any(n == "malloc" for n in names) else None


def check_binary(path: str | Path, system: frozenset[str] | None = None) -> NativeReport:
    """Every import of the shared object at `path`, held against the allowlist."""
    started = time.perf_counter()
    try:
        imports = elf.read_dynamic(path).imports
    except (OSError, elf.ElfError) as exc:
        return NativeReport(str(path), 0, (), time.perf_counter() - started, str(exc))
    denied = []
    for symbol in imports:
        verdict = symbols.classify(symbol, system)
        if not verdict.allowed:
            denied.append(Denied(symbol.name, symbols.readable(symbol.name), verdict.why))
    return NativeReport(str(path), len(imports), tuple(denied), time.perf_counter() - started)


class NativeAudit:
    """Checks extensions once each and keeps the verdicts for the worker.

    `watched`: folders the candidate can write to; a shared object mapped from one of them is
    the candidate's and is checked by sweep(). System libraries there are not trusted."""

    def __init__(self, watched: Iterable[str | Path] = ()):
        self.watched = tuple(os.path.realpath(p) for p in watched)
        self.reports: dict[str, NativeReport] = {}
        self._system: frozenset[str] | None = None
        self._libraries: list[str] | None = None

    def system(self) -> frozenset[str] | None:
        """The system libraries' exports, read again when the mapped set changed (an
        extension may bring one in: libmvec, the CUDA runtime)."""
        libraries = process_libraries(self.watched)
        if libraries != self._libraries:
            self._system = system_exports(libraries=libraries)
            self._libraries = libraries
        return self._system

    def check(self, path: str | Path) -> NativeReport:
        key = os.path.realpath(path)
        if key not in self.reports:
            self.reports[key] = check_binary(key, self.system())
        return self.reports[key]

    def sweep(self) -> None:
        """Check every shared object mapped from a watched folder that is not checked yet."""
        if not self.watched:
            return
        roots = tuple(root + os.sep for root in self.watched)
        try:
            with open("/proc/self/maps") as maps:
                fields = [line.split(None, 5) for line in maps]
        except OSError:
            return
        # the kernel writes resolved paths here: a prefix test is enough
        for path in sorted({f[5].strip() for f in fields if len(f) == 6}):
            if path.startswith(roots) and ".so" in os.path.basename(path):
                self.check(path)

    def failures(self) -> list[NativeReport]:
        return [r for r in self.reports.values() if not r.ok]

    def message(self) -> str:
        """Why the candidate is refused, and what to do; "" while nothing is denied."""
        failed = self.failures()
        if not failed:
            return ""
        return "; ".join(r.message() for r in failed) + f". Instead, {ADVICE}"
