"""`worldsample eval policies|search`: policy evaluation and Best-of-N search in a run's world model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.common import RUN, console, friendly_errors

app = typer.Typer(help="Score policies in the world model and search with it (docs/evaluation.md).",
                  no_args_is_help=True)

RunArg = Annotated[Path, typer.Argument(help="Run directory with policies and a world model.", exists=True,
                                        file_okay=False)]
StartsOpt = Annotated[str, typer.Option(
    help="Initial observations: heldout (first frames of held-out store episodes), sim (the simulated arm's "
         "evaluation resets, the same states --real starts from) or auto (heldout when there are enough).")]
WmOpt = Annotated[int | None, typer.Option("--world-model", help=f"World-model version (default: latest in "
                                           f"{RUN.world_model}/).")]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _num(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


@app.command(help=f"Score policy versions in the world model (and on the simulated arm); report in {RUN.reports}/.")
@friendly_errors
def policies(
    run: RunArg,
    policies_: Annotated[str | None, typer.Option(
        "--policies", help="Versions, e.g. v3,v7 (or all); default up to 10 spread over the registry, the last "
                           "one included.")] = None,
    real: Annotated[bool, typer.Option("--real/--no-real", help="Also run each version on the simulated arm "
                                       "(deterministic, held-out seeds) and rank against it.")] = True,
    starts: StartsOpt = "heldout",
    n_starts: Annotated[int, typer.Option(min=1, help="Initial observations.")] = 20,
    horizon: Annotated[int | None, typer.Option(min=1, help="Imagined steps (default: the arm's episode "
                                                "length).")] = None,
    samples: Annotated[int | None, typer.Option(min=1, help="Imagined futures per start (default 4 with a "
                                                "stochastic world model, else 1).")] = None,
    episodes: Annotated[int, typer.Option(min=1, help="--real: episodes per version.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the imagined futures.")] = 0,
    world_model: WmOpt = None,
    recommend: Annotated[bool, typer.Option("--recommend/--no-recommend", help=(
        f"Point {RUN.policies}/recommended at the recommended version (the bridge can follow it)."))] = False,
) -> None:
    from rich.table import Table

    from worldsample.evaluation.policies import (
        evaluate_policies,
        parse_versions,
        plot_scatter,
        report_name,
        write_report,
    )
    from worldsample.evaluation.recommend import write_recommended
    from worldsample.paths import RunFiles
    from worldsample.policy import PolicyRegistry

    versions = parse_versions(policies_, PolicyRegistry(run).versions())
    with console.status("scoring...") as status:
        report = evaluate_policies(run, versions, real=real, starts=starts, n_starts=n_starts, horizon=horizon,
                                   samples=samples, seed=seed, episodes=episodes, wm_version=world_model,
                                   on_progress=lambda m: status.update(m))
    name = report_name("policy_eval", run)
    path = write_report(run, report, name)
    table = Table(title=f"policies in world model {report['world_model']} ({report['generator']}), "
                        f"{report['n_starts']} {starts} starts x {report['samples']}, horizon {report['horizon']}")
    for col in ("policy", "imagined success", "success prob", "imagined return", *(
            ("real success", "real return", "real length") if real else ())):
        table.add_column(col, justify="right")
    for v in versions:
        im = report["imagined"][f"v{v}"]
        re_ = report["real"].get(f"v{v}")
        mark = " *" if f"v{v}" == report["recommended"] else ""
        cells = [f"v{v}{mark}", _pct(im["success_rate"]), _num(im["success_prob"]), _num(im["mean_return"])]
        if real:
            cells += [_pct(re_["success_rate"]), _num(re_["mean_return"]), _num(re_["mean_length"], 1)]
        table.add_row(*cells)
    console.print(table)
    if real:
        console.print(f"Pearson {_num(report['pearson'])}, Spearman {_num(report['spearman'])}, "
                      f"MMRV {_num(report['mmrv'], 3)} (constant score {_num(report['mmrv_constant'], 3)}; lower is "
                      f"better); recommended {report['recommended']} "
                      f"{_pct(report['recommended_real_success'])} real, best {report['best_real']} "
                      f"{_pct(report['best_real_success'])}, last {report['last']} {_pct(report['last_real_success'])}")
    else:
        console.print(f"recommended: {report['recommended']} (* in the table)")
    console.print(f"report: [bold]{path}[/]")
    png = plot_scatter(report, RunFiles.of(run).reports / f"{name}.png")
    if png is not None:
        console.print(f"plot: [bold]{png}[/]")
    elif real:
        console.print("no plot: matplotlib is not installed (pip install matplotlib)")
    if recommend:
        v = int(report["recommended"].removeprefix("v"))
        pointer = write_recommended(run, v, {"report": path.name, "world_model": report["world_model"]})
        console.print(f"{pointer} -> v{v}")


@app.command(help="Best-of-N search in the world model on the simulated arm, against the base policy.")
@friendly_errors
def search(
    run: RunArg,
    n: Annotated[int, typer.Option("--n", min=1, help="Candidate action chunks per decision.")] = 8,
    horizon: Annotated[int, typer.Option("--horizon", min=1, help="Imagined steps per chunk.")] = 10,
    policy: Annotated[str | None, typer.Option(help="Base policy version (default: latest).")] = None,
    episodes: Annotated[int, typer.Option(min=1, help="Episodes of each (the same initial states).")] = 10,
    samples: Annotated[int | None, typer.Option(min=1, help="Imagined futures per chunk (default 4 with a "
                                                "stochastic world model, else 1).")] = None,
    budget_ms: Annotated[float | None, typer.Option(min=0.001, help="Per-decision time budget; past it the base "
                                                    "policy's action is executed (counted).")] = None,
    spread: Annotated[float | None, typer.Option(help="Sample candidates as the action plus N(0, spread^2) "
                                                 "(a deterministic policy needs it).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the candidates and imagined futures.")] = 0,
    world_model: WmOpt = None,
    score: Annotated[str, typer.Option(help=(
        "What ranks the candidates: success (discounted imagined success, then predicted return), value "
        f"(the learner's return so far + gamma^H * V(end state), V from the critic in {RUN.trainer}/) or "
        "critic (that critic's Q of each candidate's first action, no world model: what the model adds to "
        "value)."))] = "success",
) -> None:
    from worldsample.errors import ConfigError
    from worldsample.evaluation.critic import load_critic
    from worldsample.evaluation.imagined import load_world_model
    from worldsample.evaluation.policies import parse_versions, report_name, run_env_config, write_report
    from worldsample.evaluation.search import run_search
    from worldsample.evaluation.starts import eval_seed0
    from worldsample.policy import PolicyRegistry, load_actor

    if score not in ("success", "value", "critic"):
        raise ConfigError(f"--score must be success, value or critic, got {score!r}")
    registry = PolicyRegistry(run)
    version = parse_versions(policy, registry.versions())[0] if policy else registry.latest_version()
    if version is None:
        raise ConfigError(f"no policy published in {registry.root} yet")
    critic = load_critic(run) if score != "success" else None  # before anything slow: no checkpoint, no search
    actor = load_actor(run, version)
    model, wm_v = load_world_model(run, world_model)
    env_cfg = run_env_config(run)
    seeds = [eval_seed0() + i for i in range(episodes)]
    with console.status("base policy...") as status:
        def on_episode(kind: str, i: int, ep: dict) -> None:
            status.update(f"{kind} episode {i + 1}/{episodes}: {'success' if ep['success'] else 'failure'}")

        report = run_search(model, actor, env_cfg, seeds, n, horizon, samples=samples,
                            budget_s=None if budget_ms is None else budget_ms / 1000, seed=seed, spread=spread,
                            on_episode=on_episode, score=score, critic=critic)
    report = {"kind": "best_of_n", **report, "world_model": f"v{wm_v}", "generator": model.cfg.generator.kind}
    d = report["decisions"]
    report["policies"] = [
        {"policy": f"v{version}", "episodes": episodes, "success_rate": report["base_success"],
         "mean_return": report["base_mean_return"]},
        {"policy": f"v{version} best-of-{n}" + (f" ({score})" if score != "success" else ""), "episodes": episodes,
         "success_rate": report["search_success"], "mean_return": report["search_mean_return"]},
    ]
    path = write_report(run, report, report_name("best_of_n", run))
    scored = "success" if critic is None else f"{score} (critic of trainer checkpoint v{critic.source['checkpoint']})"
    console.print(f"policy v{version}, world model v{wm_v}: base {_pct(report['base_success'])}, best-of-{n} "
                  f"(horizon {horizon}, scored by {scored}) {_pct(report['search_success'])} over the same "
                  f"{episodes} initial states ({100 * report['gain']:+.0f} points)")
    mean_ms = "-" if d["mean_decision_s"] is None else f"{1000 * d['mean_decision_s']:.1f}"
    console.print(f"decisions {d['decisions']}: mean {mean_ms} ms, max {1000 * d['max_decision_s']:.1f} ms; "
                  f"fallbacks to the base policy {d['fallbacks']}, over budget {d['overruns']}")
    console.print(f"report: [bold]{path}[/]")
