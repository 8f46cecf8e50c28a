"""`kforge export CANDIDATE --out FILE.py`: a kernel from the database as a drop-in module
(its `ModelNew` replaces the problem's `Model` in a real program). Registered in cli/app.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kforge_search.cli.db import DEFAULT_DB, DbOpt

if TYPE_CHECKING:
    from kforge_search.store.queries import Exportable


def _header(k: Exportable) -> str:
    pairs = (("eager", k.speedup_eager), ("torch.compile", k.speedup_compile))
    speedups = ", ".join(f"{v:.2f}x vs {name}" for name, v in pairs if v)
    if speedups and k.device_name:
        speedups += f" on {k.device_name}"
    state = "verified" if k.verified else "NOT verified"
    return (
        f"# Exported by kforge: candidate {k.candidate_id} for {k.problem_name} "
        f"({k.platform}), {state}{'; ' + speedups if speedups else ''}.\n"
        "# Use: `from this_module import ModelNew`, built with the constructor arguments of the\n"
        "# problem's Model; it creates its parameters the same way, so a state_dict carries over.\n"
    )


def export_cmd(
    candidate: Annotated[str, typer.Argument(help="candidate id (or a unique prefix)")],
    out: Annotated[Path, typer.Option("--out", help="the Python module to write")],
    db: DbOpt = DEFAULT_DB,
    unverified: Annotated[
        bool, typer.Option(help="export a kernel that has not verified (not for real use)")
    ] = False,
    force: Annotated[bool, typer.Option(help="overwrite OUT if it exists")] = False,
) -> None:
    """Write a kernel from the database as a drop-in `ModelNew` module."""
    from kforge_search.cli.common import console, fail
    from kforge_search.cli.db import _read
    from kforge_search.store.queries import exportable

    kernel = _read(db, exportable, candidate)
    if not kernel.verified and not unverified:
        fail(
            f"candidate {kernel.candidate_id} has not verified: its outputs did not match, or it "
            "was never evaluated OK",
            "`kforge db best --problem ...` lists verified kernels; --unverified exports anyway",
        )
    if out.exists() and not force:
        fail(f"{out} exists: it is left as it is", "pass --force to overwrite it, or another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_header(kernel) + kernel.source)
    console.print(
        f"wrote {out}: candidate {kernel.candidate_id} ({kernel.platform})", highlight=False
    )
