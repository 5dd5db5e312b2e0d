"""`worldsample train RUN`: the real-synthetic loop on Ray (services/trainer)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.common import RUN, ConfigOpt, SetOpt, as_command, console, friendly_errors, overrides_text
from services.cli.progress import TrainingProgress
from worldsample.paths import RunFiles


def print_summary(s) -> None:
    before = "-" if s.success_before is None else f"{100 * s.success_before:.0f}%"
    after = "-" if s.success_after is None else f"{100 * s.success_after:.0f}%"
    console.print(
        f"[bold]trained[/] {s.real_steps} real steps ({s.episodes} episodes), "
        f"{s.updates} updates in {s.seconds:.0f} s; "
        f"success {before} -> {after}; synthetic share of batches {100 * s.synthetic_share_mean:.0f}% over the run "
        f"({100 * s.synthetic_share:.0f}% in the last); world-model versions {s.wm_versions}"
    )
    if s.human_last_quarter is not None:
        console.print(f"human-driven share of online steps in the last quarter: {100 * s.human_last_quarter:.0f}%")
    if s.best is not None and s.best[2] is not None:
        steps, rate, version = s.best
        console.print(f"best evaluated policy: v{version}, {100 * rate:.0f}% at {steps} real steps; the last "
                      f"evaluation is {s.last_vs_best:.0f} points below it (every version is in {RUN.policies}/)")
    if s.recommended is not None:
        console.print(f"recommended by the world model: v{s.recommended} ({RUN.policies}/recommended; "
                      "`worldsample eval policies RUN` compares it with real success)")
    if s.wm_eval:
        rows = s.wm_eval["horizons"]
        if "psnr" in next(iter(rows.values())):
            fid = ", ".join(f"{h} steps {r['psnr']:.1f} dB (copy {r['copy_psnr']:.1f})" for h, r in rows.items())
            console.print(f"world model v{s.wm_eval['version']} PSNR on held-out {s.wm_eval['group']} episodes: {fid}")
        else:
            for line in vector_fidelity_lines(s.wm_eval):
                console.print(line)
        if s.wm_eval.get("heads"):
            console.print(f"world model's heads on held-out {s.wm_eval['group']} windows, at the thresholds "
                          f"calibrated on them: {head_scores(s.wm_eval['heads'])}")


def head_scores(heads: dict) -> str:
    """'success precision 52% recall 70% (13 positives in 400 windows); done ...'; '-' where undefined."""
    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}%"

    return "; ".join(f"{name} precision {pct(r.get('precision'))} recall {pct(r.get('recall'))} "
                     f"({r.get('positives', 0)} positives in {r.get('windows', 0)} windows)"
                     for name, r in heads.items())


@friendly_errors
def train(
    run: Annotated[Path, typer.Argument(help="Run directory with demonstrations (worldsample demos collect).")],
    robot: Annotated[
        str | None,
        typer.Option(
            help="sim: step the simulated arm in-process (lock-step); bridge: learn from what the bridge commits. "
            f"Default: the run's own config ({RUN.config}), else sim."
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run's trainer from its latest checkpoint.")
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster to run on (HEAD:PORT of `ray start --head`); default: start a local Ray."),
    ] = None,
    place: Annotated[
        list[str] | None,
        typer.Option(help="PART=RESOURCE: run a part (learner, world_model, synth, sim, evaluator) only on nodes "
                     "started with that custom Ray resource (ray start --resources '{\"wm_node\": 1}'). Repeatable."),
    ] = None,
    gpu: Annotated[
        str, typer.Option(help="auto: learner and world model on GPU nodes when the cluster has GPUs, else CPU; "
                          "on: require GPUs; off: CPU.")
    ] = "auto",
    on_node_loss: Annotated[
        str, typer.Option(help="When the node of the world model or synthesis is lost: wait for a node with its "
                          "resources (up to --node-wait-s), or continue (start it again beside the driver).")
    ] = "wait",
    node_wait_s: Annotated[float, typer.Option(help="--on-node-loss wait: seconds to wait for a node.")] = 600.0,
    progress_every: Annotated[
        float, typer.Option(min=0.5, help="Seconds between the progress lines printed while training.")
    ] = 10.0,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Online RL with world-model augmentation and Policy-Paced Learning.

    A run that has its own config (RUN/config.yaml, written by `worldsample run` and by every
    `train`) trains with it: --config is an overlay on it and --set applies on top. The result is
    saved back to RUN/config.yaml, and each start or resume is a line of RUN/config_history.jsonl.
    """
    from services.trainer.driver import train as run_train
    from services.trainer.placement import Placement
    from worldsample.config import load_config, load_run_config, record_config
    from worldsample.loop.loop import check_run_dir

    placement = Placement.from_cli(place, gpu, on_node_loss, node_wait_s)
    check_run_dir(run, resume)  # before anything is written into the run directory
    overrides = [*(set_ or []), *([f"loop.robot={robot}"] if robot else [])]
    cfg = load_run_config(run, config, overrides)
    if cfg is None:
        overrides = [*(set_ or []), f"loop.robot={robot or 'sim'}"]
        cfg = load_config(config, overrides)
    else:
        console.print(f"config: the run's own, {RunFiles.of(run).config}")
        if config is not None or overrides:
            console.print(f"{'resume' if resume else 'train'} with overrides: {overrides_text(config, overrides)}",
                          highlight=False)
    command = as_command("train", run, robot=robot, resume=resume, address=address, place=place,
                         gpu=None if gpu == "auto" else gpu,
                         on_node_loss=None if on_node_loss == "wait" else on_node_loss,
                         node_wait_s=None if node_wait_s == 600.0 else node_wait_s, config=config, set=set_)
    record_config(run, cfg, "resume" if resume else "train", command, overlay=config, overrides=overrides)
    with TrainingProgress(run, cfg.loop.real_steps, console, every_s=progress_every) as progress:
        summary = run_train(run, cfg, resume=resume, address=address, on_round=progress.on_round,
                            placement=placement)
    print_summary(summary)


def _fidelity_cell(key: str, horizon: str, row: dict) -> str:
    model, copy = row[key], row[key.replace("rmse_", "rmse_copy_")]
    ratio = f", {model / copy:.2f}x" if copy > 0 else ""
    velocity = row.get(key.replace("rmse_", "rmse_velocity_"))
    steady = f"; constant velocity {velocity:.4f}" if velocity is not None else ""
    return f"{horizon} steps {model:.4f} (copy {copy:.4f}{ratio}{steady})"


def vector_fidelity_lines(wm_eval: dict) -> list[str]:
    """The state model's held-out RMSE per horizon against copying the last state (and the last step's
    change extrapolated, where the evaluation has it): the whole vector, then each part the evaluation
    reports (hand, object, goal, ...); a part copying gets exactly right (the goal) shows its error alone."""
    rows = wm_eval["horizons"]
    keys = [k for k in next(iter(rows.values())) if not k.startswith(("rmse_copy_", "rmse_velocity_"))]
    lines = []
    for i, key in enumerate(keys):
        fid = ", ".join(_fidelity_cell(key, h, r) for h, r in rows.items())
        what = (f"world model v{wm_eval['version']} (no camera) {key} on held-out {wm_eval['group']} episodes"
                if i == 0 else f"  {key}")
        lines.append(f"{what}: {fid}")
    return lines
