"""KernelBench-format problems: parse, identify, resize and execute them.

A problem is a Python file with `class Model`, `get_inputs()`, `get_init_inputs()` and
module-level constants. The parent process only parses problems (no torch import); the
code runs in evaluator child processes through `exec_problem`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from kforge_search import pysource
from kforge_search.module_constants import (
    SIZES_NAME,
    assignable,
    bindings,
    free_constants,
    rewrite,
)
from kforge_search.sizes import derived_size_sets

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
DEFAULT_SIZES = "default"


class ProblemError(ValueError):
    """A problem file that cannot be used; the message says what to fix."""


class DeviceBusy(ProblemError):
    """The problem's reference lacked device memory that other processes held at the time
    (the device as a whole has enough): not the problem's fault; run it again when the device
    is freer (kforge bench runs it again alone)."""


def normalize_source(source: str) -> str:
    """Source without comments or formatting differences (the basis of ids)."""
    return ast.unparse(pysource.parse(source))


def source_hash(source: str, *extra: str) -> str:
    """Hash of the normalized source (of the raw text when it does not parse)."""
    try:
        text = normalize_source(source)
    except SyntaxError:
        text = source
    digest = hashlib.sha256(text.encode())
    for part in extra:
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Problem:
    id: str
    name: str
    path: str
    source: str
    # module-level constants bound to values that name no other constant (`n = 1024 * 2`),
    # evaluated; values computed from others (`bias_shape = (n, 1)`) follow overrides
    constants: tuple[tuple[str, Any], ...]
    # KFORGE_SIZES, plus `ci` and `unseen` derived where it lacks them (kforge_search.sizes)
    size_sets: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
    size_set: str = DEFAULT_SIZES
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def sizes(self) -> dict[str, Any]:
        """The effective module-level constants after overrides."""
        return {**dict(self.constants), **dict(self.overrides)}

    @property
    def sizes_key(self) -> str:
        return ",".join(f"{k}={v!r}" for k, v in sorted(self.sizes.items()))

    def resized(
        self, size_set: str | None = None, overrides: Mapping[str, Any] | None = None
    ) -> Problem:
        """This problem at a named size set (from KFORGE_SIZES) plus explicit overrides."""
        merged: dict[str, Any] = {}
        name = size_set or DEFAULT_SIZES
        if name != DEFAULT_SIZES:
            sets = dict(self.size_sets)
            if name not in sets:
                known = ", ".join([DEFAULT_SIZES, *sets]) or DEFAULT_SIZES
                raise ProblemError(
                    f"problem {self.name} has no size set {name!r}; known: {known}. "
                    f"Add it to {SIZES_NAME} in {self.path} or pass explicit overrides."
                )
            merged.update(sets[name])
        merged.update(overrides or {})
        names = assignable(pysource.parse(self.source))
        unknown = sorted(set(merged) - names)
        if unknown:
            raise ProblemError(
                f"cannot override {', '.join(unknown)} in {self.name}: not a module-level "
                f"constant. Constants you can set: {', '.join(sorted(names)) or 'none'}."
            )
        sized = replace(self, size_set=name, overrides=tuple(sorted(merged.items())))
        try:
            sized.program()
        except ValueError as exc:
            raise ProblemError(
                f"cannot override in {self.name}: {exc}; give a number, string, tuple or list"
            ) from None
        return sized

    def program(self) -> str:
        """The source with every binding of an overridden constant set to its override;
        constants computed from it follow (kforge_search.module_constants.rewrite)."""
        if not self.overrides:
            return self.source
        return ast.unparse(rewrite(pysource.parse(self.source), dict(self.overrides)))


def _size_sets(tree: ast.Module, path: str) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    for node in tree.body:
        if SIZES_NAME in {b.name for b in bindings(ast.Module(body=[node], type_ignores=[]))}:
            try:
                sets = ast.literal_eval(node.value)
            except (ValueError, SyntaxError) as exc:
                raise ProblemError(f"{path}: {SIZES_NAME} must be a literal dict ({exc})") from None
            if not isinstance(sets, dict) or not all(isinstance(v, dict) for v in sets.values()):
                raise ProblemError(f"{path}: {SIZES_NAME} must map names to dicts of constants")
            given = {k: tuple(sorted(v.items())) for k, v in sets.items()}
            break
    else:
        given = {}
    return tuple({**given, **derived_size_sets(tree, given)}.items())


def _defined_names(tree: ast.Module) -> set[str]:
    names = {b.name for b in bindings(tree)}
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def parse_problem(source: str, path: str, name: str) -> Problem:
    """Check the structure of a problem's source and describe it (nothing is executed)."""
    try:
        tree = pysource.parse(source, filename=path)
    except SyntaxError as exc:
        raise ProblemError(f"{path} is not valid Python: {exc}") from None
    missing = [n for n in REQUIRED if n not in _defined_names(tree)]
    if missing:
        raise ProblemError(
            f"{path} is not a KernelBench-format problem: it lacks {', '.join(missing)}. "
            "A problem defines class Model(nn.Module), get_inputs() (the forward inputs) "
            "and get_init_inputs() (the constructor arguments)."
        )
    return Problem(
        id=source_hash(source),
        name=name,
        path=path,
        source=source,
        constants=tuple(sorted(free_constants(tree).items())),
        size_sets=_size_sets(tree, path),
    )


def load_problem(
    path: str | Path,
    *,
    size_set: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Problem:
    file = Path(path)
    if not file.is_file():
        raise ProblemError(f"no problem file at {file}: pass the path of a .py problem file")
    problem = parse_problem(file.read_text(), str(file.resolve()), name or file.stem)
    _check_imports(problem)
    return problem.resized(size_set, overrides)


def _check_imports(problem: Problem) -> None:
    """A problem whose module-level imports are not installed here cannot run: say which
    (found without importing them)."""
    missing = []
    for node in pysource.parse(problem.source).body:
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        missing += [t for t in tops if t not in missing and importlib.util.find_spec(t) is None]
    if missing:
        raise ProblemError(
            f"{problem.path} imports {', '.join(missing)}, not installed in this Python "
            f"({sys.executable}): install {' '.join(missing)} (e.g. pip install "
            f"{' '.join(missing)}) to use this problem"
        )


def bundled_problems_dir() -> Path:
    """The bundled suite: installed package data, or problems/ beside a source checkout."""
    try:
        return Path(str(resources.files("kforge_search.problems")))
    except ModuleNotFoundError:  # running from a checkout on PYTHONPATH, not installed
        return Path(__file__).resolve().parents[1] / "problems"


def find_problems(path: str | Path | None = None) -> tuple[list[Problem], list[str]]:
    """Problems in a file or under a directory (recursively), and the files skipped with why."""
    root = Path(path) if path is not None else bundled_problems_dir()
    if root.is_file():
        return [load_problem(root)], []
    if not root.is_dir():
        raise ProblemError(f"{root} is neither a problem file nor a directory of problems")
    problems, skipped = [], []
    for file in sorted(root.rglob("*.py")):
        if file.name == "__init__.py" or "__pycache__" in file.parts:
            continue
        name = file.relative_to(root).with_suffix("").as_posix()
        try:
            problems.append(load_problem(file, name=name))
        except ProblemError as exc:
            skipped.append(f"{file}: {exc}")
    return problems, skipped


def resolve_problem(
    ref: str, *, size_set: str | None = None, overrides: Mapping[str, Any] | None = None
) -> Problem:
    """A problem by path, by bundled name (e.g. level2/01_gemm_bias_relu) or by id."""
    file = Path(ref)
    if file.is_file():
        return load_problem(file, size_set=size_set, overrides=overrides)
    bundled = bundled_problems_dir()
    candidate = bundled / (ref if ref.endswith(".py") else f"{ref}.py")
    if candidate.is_file():
        name = candidate.relative_to(bundled).with_suffix("").as_posix()
        return load_problem(candidate, size_set=size_set, overrides=overrides, name=name)
    problems, _ = find_problems(bundled)
    matches = [p for p in problems if p.id.startswith(ref) or p.name == ref]
    if len(matches) == 1:
        return matches[0].resized(size_set, overrides)
    raise ProblemError(
        f"no problem {ref!r}: give a path to a problem file, a bundled name such as "
        "level2/01_gemm_bias_relu, or an id from `kforge problems list`"
    )


def exec_problem(problem: Problem) -> types.ModuleType:
    """Run the problem's program (with overrides) in a fresh module. Child processes only."""
    module = types.ModuleType(f"kforge_problem_{problem.id}")
    module.__file__ = problem.path
    code = compile(problem.program(), problem.path, "exec")
    exec(code, module.__dict__)
    return module
