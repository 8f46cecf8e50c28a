"""KernelBench-format problems: parse, identify, resize and execute them.

A problem is a Python file with `class Model`, `get_inputs()`, `get_init_inputs()` and
module-level constants. The parent process only parses problems (no torch import); the
code runs in evaluator child processes through `exec_problem`.
"""

from __future__ import annotations

import ast
import hashlib
import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
SIZES_NAME = "KFORGE_SIZES"
DEFAULT_SIZES = "default"


class ProblemError(ValueError):
    """A problem file that cannot be used; the message says what to fix."""


def normalize_source(source: str) -> str:
    """Source without comments or formatting differences (the basis of ids)."""
    return ast.unparse(ast.parse(source))


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
    constants: tuple[tuple[str, Any], ...]  # module-level literal constants, as written
    size_sets: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]  # from KFORGE_SIZES
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
        assignable = _assigned_names(ast.parse(self.source))
        unknown = sorted(set(merged) - assignable)
        if unknown:
            raise ProblemError(
                f"cannot override {', '.join(unknown)} in {self.name}: not a module-level "
                f"constant. Constants you can set: {', '.join(sorted(assignable)) or 'none'}."
            )
        return replace(self, size_set=name, overrides=tuple(sorted(merged.items())))

    def program(self) -> str:
        """The source with module-level constants replaced by the overrides."""
        if not self.overrides:
            return self.source
        values = dict(self.overrides)
        tree = ast.parse(self.source)
        for node in tree.body:
            target = _single_target(node)
            if target in values:
                node.value = ast.parse(repr(values[target]), mode="eval").body
        return ast.unparse(ast.fix_missing_locations(tree))


def _single_target(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        return node.target.id
    return None


def _assigned_names(tree: ast.Module) -> set[str]:
    return {name for node in tree.body if (name := _single_target(node)) and name != SIZES_NAME}


def _literal_constants(tree: ast.Module) -> dict[str, Any]:
    constants: dict[str, Any] = {}
    for node in tree.body:
        name = _single_target(node)
        if name is None or name == SIZES_NAME:
            continue
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(value, int | float | bool | str | tuple):
            constants[name] = value
    return constants


def _size_sets(tree: ast.Module, path: str) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    for node in tree.body:
        if _single_target(node) == SIZES_NAME:
            try:
                sets = ast.literal_eval(node.value)
            except (ValueError, SyntaxError) as exc:
                raise ProblemError(f"{path}: {SIZES_NAME} must be a literal dict ({exc})") from None
            if not isinstance(sets, dict) or not all(isinstance(v, dict) for v in sets.values()):
                raise ProblemError(f"{path}: {SIZES_NAME} must map names to dicts of constants")
            return tuple((k, tuple(sorted(v.items()))) for k, v in sets.items())
    return ()


def _defined_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif (name := _single_target(node)) is not None:
            names.add(name)
    return names


def parse_problem(source: str, path: str, name: str) -> Problem:
    """Check the structure of a problem's source and describe it (nothing is executed)."""
    try:
        tree = ast.parse(source, filename=path)
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
        constants=tuple(sorted(_literal_constants(tree).items())),
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
    return problem.resized(size_set, overrides)


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
