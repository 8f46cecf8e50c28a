"""`kforge search PROBLEMS... --platform P`: the options, checked and turned into a search
plan that cli/execute.py runs. Registered in cli/app.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from kforge_search.cli.db import DEFAULT_DB, DbOpt
from kforge_search.cli.output import FormatOpt


def _provider(model: str, provider: str | None, base_url: str | None) -> str:
    """--provider, else from the model's name (claude*: Anthropic's Messages), else from
    --base-url (an OpenAI-compatible server), else OpenAI."""
    if provider:
        return provider
    if model.startswith("claude"):
        return "anthropic"
    return "compatible" if base_url else "openai"


def _llm_config(model: str, provider: str | None, base_url: str | None, llm: dict[str, Any],
                max_usd: float | None) -> Any:  # fmt: skip
    """The LLM settings, checked before anything starts: the key is in the environment, and
    a money budget can price the model."""
    from rich.markup import escape

    from kforge_search.cli.common import err, fail
    from kforge_search.llm.config import LLMConfig
    from kforge_search.llm.prices import PriceTable

    prices = llm.pop("prices", None)
    try:
        config = LLMConfig(_provider(model, provider, base_url), model, base_url=base_url,
                           prices_file=str(Path(prices).resolve()) if prices else "",
                           **llm)  # fmt: skip
        table = PriceTable.load(config.prices_file or None)
    except ValueError as exc:
        fail(str(exc))
    if config.key_env and not os.environ.get(config.key_env):
        fail(f"no API key for {config.provider}: set {config.key_env} in the environment")
    if not table.known(model):
        if max_usd is not None:
            fail(
                escape(
                    f"--max-usd {max_usd:g}: no price is known for the model {model}, so its "
                    "calls would cost $0 and the limit would never stop the search; give its "
                    f'prices with --prices FILE (JSON {{"{model}": [usd_per_mtok_in, '
                    "usd_per_mtok_out]}) or $KFORGE_PRICES"
                )
            )
        err.print(
            f"warning: no price is known for the model {model}: its calls are recorded at $0 "
            "(--prices FILE gives one)",
            highlight=False,
        )
    return config


def _agents(
    agent: str,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    cache: str | None,
    supervision: str = "auto",
    llm: dict[str, Any] | None = None,
    max_usd: float | None = None,
) -> tuple[Any, ...]:
    """builtin: the builtin agent; llm: LLM lineages, every second one a builtin seed
    lineage whose kernels the LLM lineages get as references."""
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.agents.llm.agent import LLMAgent
    from kforge_search.cli.common import fail

    if agent == "builtin":
        return (BuiltinAgent(),)
    if agent != "llm":
        fail(f"--agent {agent}: use builtin or llm")
    if not model:
        fail("--agent llm needs --model", "e.g. --model gpt-4o, or a local server's model name")
    assert model is not None
    config = _llm_config(model, provider, base_url, dict(llm or {}), max_usd)
    try:
        writer = LLMAgent(config, cache_dir=cache, supervision=supervision)
    except ValueError as exc:
        fail(str(exc))
    return (writer, BuiltinAgent())  # lineage #0 is an LLM's


def _check_numbers(**values: tuple[float | None, float, bool]) -> None:
    """Each option's value (name: (value, least, least allowed)) in range, or one line."""
    from kforge_search.cli.common import fail

    for name, (value, least, inclusive) in values.items():
        if value is None:
            continue
        if value < least or (value == least and not inclusive):
            need = f">= {least:g}" if inclusive else f"> {least:g}"
            fail(f"--{name.replace('_', '-')} {value:g}: needs {need}")


def _load_resume(db: str, ref: str) -> Any:
    """The run to resume, read before the writer actor takes the database file."""
    from kforge_search.cli.common import fail
    from kforge_search.search.resume import ResumeError, load_run
    from kforge_search.store.connection import StoreLockedError
    from kforge_search.store.reader import Reader

    try:
        with Reader.open(db) as reader:
            return load_run(reader, ref)
    except (ResumeError, StoreLockedError) as exc:  # they say what to do
        fail(str(exc))
    except Exception as exc:  # a missing or unreadable file
        fail(f"cannot read {db}: {exc}", "pass the --db the run was recorded in")


def search_cmd(
    problems: Annotated[
        list[str] | None,
        typer.Argument(help="problem files, names or id prefixes (with --resume: the run's)"),
    ] = None,
    platform: Annotated[
        list[str] | None,
        typer.Option("--platform", help="platform(s) to search; repeat for several"),
    ] = None,
    lineages: Annotated[int, typer.Option(help="lineages per problem and platform")] = 2,
    functional_passes: Annotated[
        int,
        typer.Option(help="steps a lineage may take to a verified kernel before it gives up"),
    ] = 5,
    generations: Annotated[
        int | None,
        typer.Option(
            help="steps (evaluations) per lineage at most; lineages step on as their results "
            "come in, without waiting for each other; a step that only reuses another "
            "lineage's results is not counted (default 3; with --resume: the run's)"
        ),
    ] = None,
    max_candidates: Annotated[
        int | None, typer.Option(help="stop after this many evaluations")
    ] = None,
    max_minutes: Annotated[
        float | None,
        typer.Option(help="stop after this much wall clock (checked before each step)"),
    ] = None,
    max_gpu_minutes: Annotated[
        float | None,
        typer.Option(help="stop after this much evaluation time on GPU platforms"),
    ] = None,
    agent: Annotated[
        str, typer.Option(help="builtin, or llm: LLM lineages beside a builtin seed lineage")
    ] = "builtin",
    model: Annotated[str | None, typer.Option(help="--agent llm: the model name")] = None,
    provider: Annotated[
        str | None,
        typer.Option(help="openai, anthropic or compatible (default: from --model/--base-url)"),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="an OpenAI-compatible server, e.g. http://localhost:8000/v1")
    ] = None,
    max_llm_tokens: Annotated[
        int | None, typer.Option(help="stop when the LLM calls have used this many tokens")
    ] = None,
    max_usd: Annotated[
        float | None, typer.Option(help="stop when the LLM calls have cost this much")
    ] = None,
    llm_cache: Annotated[
        str | None, typer.Option(help="a folder of cached replies (reproducible reruns)")
    ] = None,
    llm_timeout: Annotated[
        float, typer.Option(help="seconds an LLM request may take (each attempt)")
    ] = 120.0,
    llm_retries: Annotated[
        int, typer.Option(help="retries of a failed LLM request (429, 5xx, timeout, refused)")
    ] = 2,
    max_output_tokens: Annotated[
        int,
        typer.Option(help="the most tokens an LLM reply may have (a cut reply is asked again)"),
    ] = 16384,
    prices: Annotated[
        str | None,
        typer.Option(
            help="a JSON price table: each model-name prefix with its USD per million input "
            "and output tokens (else $KFORGE_PRICES, else the built-in one; docs/llm.md)"
        ),
    ] = None,
    supervision: Annotated[
        str,
        typer.Option(
            help="--agent llm, functional passes: auto, reference-free, cross-platform or one-shot"
        ),
    ] = "auto",
    profile: Annotated[
        bool | None,
        typer.Option(
            "--profile/--no-profile",
            help="profile verified candidates (torch.profiler, ncu where it runs, CPU counters) "
            "and store recommendations; default: on with --agent llm",
        ),
    ] = None,
    policy: Annotated[str, typer.Option(help="numeric policy: strict or loose")] = "strict",
    workers: Annotated[
        int | None,
        typer.Option(
            help="evaluator actors per platform (default: GPU platforms, every GPU of the "
            "cluster x --per-gpu, split among the GPU platforms; CPU platforms, 1); GPU "
            "actors are spread over every GPU, one timing lane each"
        ),
    ] = None,
    per_gpu: Annotated[
        int | None,
        typer.Option(
            "--per-gpu",
            help="GPU platforms: evaluator actors, of every GPU platform, sharing one GPU "
            "(they build and verify side by side and time one at a time; default: the GPU "
            "node's CPUs / 2 per GPU, at most 8)",
        ),
    ] = None,
    db: DbOpt = DEFAULT_DB,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="a named size set of the problems (e.g. ci)")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(help="join this Ray cluster (default: RAY_ADDRESS, else a local one)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the search")] = 0,
    in_flight: Annotated[
        int,
        typer.Option(
            "--in-flight",
            help="steps in flight (being proposed or evaluated) per evaluator actor: more "
            "keeps the evaluators fed while slow agents write",
        ),
    ] = 2,
    lineage_actors: Annotated[
        bool,
        typer.Option(
            help="run each lineage (and its agent) in its own Ray actor instead of the driver"
        ),
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            help="continue this search run from the database: its settings, its stored "
            "evaluations replayed (not run again); --generations may extend it"
        ),
    ] = None,
    fmt: FormatOpt = "table",
) -> None:
    """Search for fast kernels: lineages, generations, evolutionary selection, recorded."""
    from kforge_search.cli.common import fail, joins_cluster, load, platform_or_fail
    from kforge_search.cli.execute import Plan, execute
    from kforge_search.cli.output import check_format

    check_format(fmt)
    from kforge_search.evaluator import EvalConfig
    from kforge_search.search.budget import Budget
    from kforge_search.search.engine import SearchConfig

    _check_numbers(
        lineages=(lineages, 1, True),
        functional_passes=(functional_passes, 1, True),
        in_flight=(in_flight, 1, True),
        generations=(generations, 1, True),
        max_candidates=(max_candidates, 1, True),
        max_minutes=(max_minutes, 0, False),
        max_gpu_minutes=(max_gpu_minutes, 0, False),
        max_llm_tokens=(max_llm_tokens, 1, True),
        max_usd=(max_usd, 0, False),
        workers=(workers, 1, True),
        per_gpu=(per_gpu, 1, True),
        llm_timeout=(llm_timeout, 0, False),
        llm_retries=(llm_retries, 0, True),
        max_output_tokens=(max_output_tokens, 1, True),
    )
    llm = {"timeout_s": llm_timeout, "max_retries": llm_retries,
           "max_tokens": max_output_tokens, "prices": prices}  # fmt: skip
    agents = _agents(agent, model, provider, base_url, llm_cache, supervision, llm, max_usd)
    resumed = _load_resume(db, resume) if resume else None
    if resumed is not None:
        stored = resumed.settings
        if problems or platform:
            fail("--resume takes the run's problems and platforms: leave them out")
        problems, platform, sizes = stored["problems"], stored["platforms"], stored.get("sizes")
        kept = {k: stored[k] for k in vars(SearchConfig()) if k in stored}
        extend = {"generations": generations} if generations is not None else {}
        config_args = {**kept, **extend}
    else:
        if not problems or not platform:
            fail("give PROBLEMS and at least one --platform", "or --resume RUN")
        config_args = dict(
            lineages=lineages,
            generations=3 if generations is None else generations,
            policy=policy,
            seed=seed,
            functional_passes=functional_passes,
            in_flight_per_evaluator=in_flight,
        )
    assert problems is not None and platform is not None
    try:
        config = SearchConfig(**config_args)
        # no --max-candidates: the most the generations can evaluate (every lineage alive)
        alive = max(config.lineages, config.max_alive)
        most = len(problems) * len(platform) * alive * config.generations
        budget = Budget(
            max_candidates=most * config.drafts_per_step
            if max_candidates is None
            else max_candidates,
            wall_clock_s=None if max_minutes is None else max_minutes * 60,
            gpu_seconds=None if max_gpu_minutes is None else max_gpu_minutes * 60,
            llm_tokens=max_llm_tokens,
            money_usd=max_usd,
        )
        profiled = agent == "llm" if profile is None else profile
        eval_config = EvalConfig(policy=config.policy, profile=profiled)
    except (TypeError, ValueError) as exc:
        fail(str(exc))
    # a driver that joins a cluster (its head may have no GPU) leaves the check to the nodes
    plats = [platform_or_fail(name, here=not joins_cluster(address)) for name in platform]
    probs = [load(p, sizes, None) for p in problems]
    settings: dict[str, Any] = {"sizes": sizes, "agent": agent, "lineage_actors": lineage_actors}
    if resumed is not None:
        settings["resumed_from"] = resumed.run_id
    if model:
        settings["model"] = model
    execute(
        Plan(probs, plats, config, budget, eval_config, settings, resumed, agents=agents),
        db=db,
        address=address,
        workers=workers,
        per_gpu=per_gpu,
        fmt=fmt,
    )
