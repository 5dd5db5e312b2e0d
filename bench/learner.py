"""Updates per second of the project's SAC learner against a plain torch SAC update of the same
networks, batch and losses, measured in the same run.

    .venv/bin/python bench/learner.py [--updates 300] [--warmup 10] [--rounds 3] [--sizes 128x128,256x256]
        [--critics 2,10] [--per-call 1] [--threads 1] [--remote]

Per size and critic count: the plain torch update (twin or N critics as N separate MLPs on
[obs, action], one Adam each for actor, critics and temperature, polyak targets, the weighted
critic/actor/temperature losses and the BC term the project's learner uses); the same with torch's
fused Adam kernel (`fused=True`, which the project's learner uses; torch's default Adam on CPU is the
single-tensor loop); and `SACAgent.update` (one RLlib LearnerGroup update per batch, the loop's path,
its metrics reduced every `learner.metrics_every` calls as in the loop). Batches are random with the
state profile's shapes (39-dim observation, 4-dim action). The ratio is learner time / plain time
("vs fused": / the plain update with fused Adam); "x the learner's twin" is an ensemble's time / the
same learner's twin (critics 2 in the same run; needs 2 in --critics). The parameter counts show what
each critic is: RLlib 2.60's SAC builds its Q-network as a multi-stream encoder (an obs MLP and an
action MLP of the given sizes, joined by fusion layers of 256 units), not an MLP on [obs, action] of
those sizes.

The updates are timed in `--rounds` blocks, every update (plain, each learner, each critic count of a
size) taking its block in turn, and each time is the median over its blocks: timed one after the
other, a change in the machine's speed during the run (other processes, clock) lands on one side of
a ratio only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OBS, ACT = 39, 4


def mlp(inp: int, hidden: list[int], out: int) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for h in hidden:
        layers += [torch.nn.Linear(inp, h), torch.nn.LayerNorm(h, eps=1e-3), torch.nn.ReLU()]
        inp = h
    return torch.nn.Sequential(*layers, torch.nn.Linear(inp, out))


class PlainSAC:
    """The baseline: SAC written directly in torch, the arithmetic of one update and nothing else."""

    def __init__(self, hidden: list[int], critics: int, gamma=0.97, tau=0.005, lr=3e-4, fused: bool = False):
        self.actor = mlp(OBS, hidden, 2 * ACT)
        self.qs = torch.nn.ModuleList(mlp(OBS + ACT, hidden, 1) for _ in range(critics))
        self.targets = torch.nn.ModuleList(mlp(OBS + ACT, hidden, 1) for _ in range(critics))
        self.targets.load_state_dict(self.qs.state_dict())
        self.log_alpha = torch.zeros((), requires_grad=True)
        kw = {"fused": True} if fused else {}
        self.opt_a = torch.optim.Adam(self.actor.parameters(), lr, **kw)
        self.opt_q = torch.optim.Adam(self.qs.parameters(), lr, **kw)
        self.opt_t = torch.optim.Adam([self.log_alpha], lr, **kw)
        self.gamma, self.tau, self.target_entropy = gamma, tau, -ACT / 2

    def _sample(self, obs):
        mean, log_std = self.actor(obs).chunk(2, -1)
        std = log_std.clamp(-20, 2).exp()
        u = mean + std * torch.randn_like(mean)
        a = torch.tanh(u)
        logp = torch.distributions.Normal(mean, std).log_prob(u).sum(-1) - torch.log(1 - a.pow(2) + 1e-6).sum(-1)
        return a, logp, mean

    def update(self, b: dict[str, torch.Tensor]) -> None:
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2, _ = self._sample(b["new_obs"])
            x2 = torch.cat([b["new_obs"], a2], -1)
            idx = torch.randperm(len(self.targets))[:2].tolist()
            q2 = torch.stack([self.targets[i](x2).squeeze(-1) for i in idx]).min(0).values
            y = b["rewards"] + self.gamma ** b["n_step"] * (1 - b["terminateds"]) * (q2 - alpha * logp2)
        x = torch.cat([b["obs"], b["actions"]], -1)
        huber = torch.nn.functional.huber_loss
        q_loss = sum((b["weights"] * huber(q(x).squeeze(-1), y, reduction="none")).mean() for q in self.qs)
        self.opt_q.zero_grad(set_to_none=True)
        q_loss.backward()
        self.opt_q.step()
        a, logp, mean = self._sample(b["obs"])
        for p in self.qs.parameters():
            p.requires_grad_(False)
        q_pi = torch.stack([q(torch.cat([b["obs"], a], -1)).squeeze(-1) for q in self.qs]).mean(0)
        for p in self.qs.parameters():
            p.requires_grad_(True)
        w = b["weights"]
        actor_loss = (w * (alpha * logp - q_pi)).sum() / w.sum()
        m = b["bc_mask"] * w
        bc = (((torch.tanh(mean) - b["actions"]) ** 2).sum(-1) * m).sum() / m.sum().clamp(min=1)
        actor_loss = actor_loss + (w * q_pi.abs()).mean().detach() * bc
        self.opt_a.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.opt_a.step()
        t_loss = -(w * self.log_alpha * (logp.detach() + self.target_entropy)).sum() / w.sum()
        self.opt_t.zero_grad(set_to_none=True)
        t_loss.backward()
        self.opt_t.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(self.targets.parameters()), list(self.qs.parameters()), self.tau)


def random_batch(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A mixer batch of the state profile's shapes, in the store's keys."""
    return {
        "obs/state": rng.normal(size=(n, OBS)).astype(np.float32),
        "next_obs/state": rng.normal(size=(n, OBS)).astype(np.float32),
        "action": rng.uniform(-1, 1, (n, ACT)).astype(np.float32),
        "reward": (rng.random(n) < 0.1).astype(np.float32),
        "done": rng.random(n) < 0.02,
        "n_step": np.ones(n, np.int64),
        "weights": np.ones(n, np.float32),
        "bc_mask": (rng.random(n) < 0.5).astype(np.float32),
    }


def as_tensors(b: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {"obs": torch.as_tensor(b["obs/state"]), "new_obs": torch.as_tensor(b["next_obs/state"]),
            "actions": torch.as_tensor(b["action"]), "rewards": torch.as_tensor(b["reward"]),
            "terminateds": torch.as_tensor(b["done"]).float(), "n_step": torch.as_tensor(b["n_step"]).float(),
            "weights": torch.as_tensor(b["weights"]), "bc_mask": torch.as_tensor(b["bc_mask"])}


def timed(fn, batches: list, warmup: int) -> float:
    """Seconds per update over `batches` after `warmup` of them."""
    for b in batches[:warmup]:
        fn(b)
    t0 = time.perf_counter()
    for b in batches[warmup:]:
        fn(b)
    return (time.perf_counter() - t0) / (len(batches) - warmup)


def timed_calls(agent, batches: list, warmup: int, per_call: int) -> float:
    """Seconds per update when `per_call` updates go into one learner call (SACAgent.update_many)."""
    if per_call == 1:
        return timed(lambda b: agent.update(b, report=None), batches, warmup)  # the loop's metrics cadence
    rest = batches[warmup:]
    calls = [rest[i:i + per_call] for i in range(0, len(rest), per_call)]
    return timed(lambda bs: agent.update_many(bs, report=None), [batches[:warmup], *calls], 1) * len(calls) / len(rest)


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def agent_for(hidden: list[int], batch: int, critics: int, remote: bool, critic: str = "rllib"):
    import gymnasium as gym

    from worldsample.learner import LearnerConfig
    from worldsample.learner.sac import SACAgent

    cfg = LearnerConfig(hidden=hidden, batch_size=batch, critics=critics, critic=critic, critic_warmup_updates=0,
                        bc_pretrain_steps=0, num_learners=1 if remote else 0)
    return SACAgent(cfg, OBS, gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="blocks the updates are split into, every runner taking "
                    "its block in turn; each time is the median over blocks")
    ap.add_argument("--sizes", default="128x128,256x256", help="hidden sizes; the batch is the first width")
    ap.add_argument("--critics", default="2,10")
    ap.add_argument("--critic", default="rllib,mlp", help="the learner's critic network(s): rllib, mlp")
    ap.add_argument("--per-call", type=int, default=1,
                    help="updates per learner call (learner.updates_per_call; 1: one call per update)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--remote", action="store_true", help="the learner in a remote Ray learner actor")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    table = Table(title=f"SAC updates per second ({args.updates} updates in {args.rounds} interleaved blocks, "
                        f"{args.per_call} per learner call, {args.threads} thread(s))")
    columns = ("networks, batch", "critics", "learner critic", "critic params (plain / learner)", "plain torch",
               "plain, fused Adam", "learner.update", "ratio", "vs fused", "x the learner's twin")
    for col in columns:
        table.add_column(col, justify="right")
    if args.remote:
        import ray

        # logical CPUs: every learner of a size is built before the timing (one remote actor each), and
        # only one of them updates at a time
        ray.init(address="local", include_dashboard=False, num_cpus=16, log_to_driver=False)
    for size in args.sizes.split(","):
        hidden = [int(h) for h in size.split("x")]
        bs = hidden[0]
        counts = [int(c) for c in args.critics.split(",")]
        batches = {c: [random_batch(rng, bs) for _ in range(args.updates + args.warmup)] for c in counts}
        runners = {}  # (critics, "plain" or learner critic) -> (update fn, batches, what to close)
        params: dict[int, dict[str, int]] = {}
        for critics in counts:
            torch.manual_seed(0)
            plain = PlainSAC(hidden, critics)
            runners[critics, "plain"] = (plain.update, [as_tensors(b) for b in batches[critics]], None)
            torch.manual_seed(0)
            fused = PlainSAC(hidden, critics, fused=True)
            runners[critics, "fused"] = (fused.update, runners[critics, "plain"][1], None)
            params[critics] = {"plain": _count(plain.qs[0])}
            for critic in args.critic.split(","):
                agent = agent_for(hidden, bs, critics, args.remote, critic)
                runners[critics, critic] = (agent, batches[critics], agent)
                params[critics][critic] = agent._on_learner(
                    lambda learner: _count(learner.module["default_policy"].qf)
                    + _count(learner.module["default_policy"].qf_encoder))
        # every runner's updates in `rounds` blocks, taken in turn: drift of the machine's speed over the
        # run (other load, frequency) reaches the plain update and the learner alike
        per_round = args.updates // args.rounds
        times: dict[tuple, list[float]] = {k: [] for k in runners}
        for r in range(args.rounds):
            for key, (fn, bl, _) in runners.items():
                warm = bl[:args.warmup] if r == 0 else []  # warm-up once, before the first block
                part = warm + bl[args.warmup + r * per_round:args.warmup + (r + 1) * per_round]
                if key[1] in ("plain", "fused"):
                    times[key].append(timed(fn, part, len(warm)))
                else:
                    times[key].append(timed_calls(fn, part, len(warm), args.per_call))
        t = {k: float(np.median(v)) for k, v in times.items()}
        for _, _, agent in runners.values():
            if agent is not None:
                agent.close()
        for critics in counts:
            t_plain, t_fused = t[critics, "plain"], t[critics, "fused"]
            for critic in args.critic.split(","):
                t_one = t[critics, critic]
                vs_twin = f"{t_one / t[2, critic]:.2f}x" if (2, critic) in t else "-"
                table.add_row(f"{hidden}, {bs}", str(critics), critic,
                              f"{params[critics]['plain']:,} / {params[critics][critic]:,}",
                              f"{1 / t_plain:.0f}/s ({t_plain * 1e3:.1f} ms)",
                              f"{1 / t_fused:.0f}/s ({t_fused * 1e3:.1f} ms)",
                              f"{1 / t_one:.0f}/s ({t_one * 1e3:.1f} ms)", f"{t_one / t_plain:.2f}x",
                              f"{t_one / t_fused:.2f}x", vs_twin)
    Console(width=190).print(table)


if __name__ == "__main__":
    main()
