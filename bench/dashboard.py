"""Dashboard under load: frame and episode endpoints with 50 concurrent clients on loopback,
and what that load costs a CPU-bound training loop, measured against itself in the same run.

    .venv/bin/python bench/dashboard.py [--clients 50] [--seconds 8] [--nice 0]

Processes: the dashboard (uvicorn, as `worldsample dashboard` runs it), a load generator
(asyncio + httpx, standing in for the browsers), and a stand-in training loop (store sampling
of image transitions + a small torch MLP update, one thread). Clients act as viewers: each
picks an episode and a camera and fetches its frames in order; every 10th request is an
episode endpoint instead (metadata, a page of steps, or the episode list).

1. saturation: 50 closed-loop clients, as fast as they go: throughput, p50 and p99 latency;
2. training slowdown: training steps/s alone vs with 50 viewers playing at 10 fps each
   (500 requests/s), alternated in short windows to cancel drift, then vs the saturation load.
Every loop is bounded in time and in requests, and only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.dashboard.rundata import CAMERAS, make_run  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"


# -- the three processes ------------------------------------------------------------------------
def own_session(enabled: bool) -> None:
    """A new session is a new scheduler autogroup on Linux: like a dashboard started from its
    own terminal, and like browsers on other machines, its CPU use then does not dilute the
    training loop's group (nice values only rank processes inside one autogroup)."""
    if enabled:
        os.setsid()


def serve(run_dir: str, port: int, nice: int, session: bool) -> None:
    import uvicorn

    from services.dashboard import DashboardSettings, create_app
    from services.dashboard.server import uvicorn_config

    own_session(session)
    if nice:
        os.nice(nice)
    # the load generator's clients stand in for browsers on other machines, but all come from 127.0.0.1
    app = create_app(run_dir, DashboardSettings(port=port, token=TOKEN, max_streams_per_client=256))
    uvicorn.Server(uvicorn_config(app, "127.0.0.1", port)).run()


def train(run_dir: str, stop, samples) -> None:
    """Sample image transitions from the store and take MLP steps; report (time, steps)."""
    import torch

    from worldsample.store import EpisodeStore, GroupSampler

    torch.set_num_threads(1)
    reader = EpisodeStore(run_dir).reader("demo", keys=["proprio", "image_front"], cache=True)
    sampler = GroupSampler(reader, obs_keys=["proprio", "image_front"])
    rng = np.random.default_rng(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4 + 12 * 12, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 4),
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    steps, last = 0, time.perf_counter()
    while not stop.is_set():
        b = sampler.transitions(rng, 256)
        img = b["obs/image_front"][:, ::8, ::8].mean(axis=-1).reshape(256, -1) / 255.0
        x = torch.from_numpy(np.concatenate([b["obs/proprio"], img], axis=1).astype(np.float32))
        loss = torch.nn.functional.mse_loss(net(x), torch.from_numpy(b["action"]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        now = time.perf_counter()
        if now - last > 0.1:
            samples.put((time.time(), steps, time.process_time()))
            last = now


class Conn:
    """A lean HTTP/1.1 keep-alive client on asyncio streams (loopback only), so that the load
    generator costs little CPU next to what it measures (httpx costs about 1 ms a request)."""

    def __init__(self, port: int):
        self.port = port
        self.r = self.w = None

    async def get(self, path: str) -> tuple[int, bytes]:
        if self.w is None:
            self.r, self.w = await asyncio.open_connection("127.0.0.1", self.port)
        self.w.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head = await self.r.readuntil(b"\r\n\r\n")
        n = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        return int(head[9:12]), await self.r.readexactly(n)

    async def stream(self, path: str, until: float, on_part) -> None:
        """Read a chunked streaming response until `until`, calling on_part per MJPEG part or SSE event."""
        r, w = await asyncio.open_connection("127.0.0.1", self.port)
        w.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await r.readuntil(b"\r\n\r\n")
        try:
            while time.perf_counter() < until:
                size = int(
                    (await asyncio.wait_for(r.readline(), max(0.01, until - time.perf_counter()))).strip() or b"0", 16
                )
                if size == 0:
                    break
                data = await r.readexactly(size + 2)
                if data.startswith((b"--wsframe\r\n", b"event:")):
                    on_part(len(data))
        except TimeoutError:
            pass
        finally:
            w.close()

    def close(self) -> None:
        if self.w is not None:
            self.w.close()


def saturate(
    port: int, episodes: list, clients: int, seconds: float, max_requests: int, rate: float | None, results
) -> None:
    own_session(True)
    results.put(asyncio.run(_saturate(port, episodes, clients, seconds, max_requests, rate)))


async def _saturate(
    port: int, episodes: list, clients: int, seconds: float, max_requests: int, rate: float | None = None
) -> dict:
    """Each client fetches the frames of an episode in order, as fast as it can (closed loop)
    or `rate` requests a second; every 10th request is an episode endpoint instead."""
    lat: dict[str, list[float]] = {"frame": [], "episode": []}
    state = {"n": 0, "errors": 0, "bytes": 0}
    t_end = time.perf_counter() + seconds

    async def client(k: int) -> None:
        rng, conn = random.Random(k), Conn(port)
        nxt = time.perf_counter() + (rng.random() / rate if rate else 0)
        while True:
            group, ep, length = rng.choice(episodes)
            cam = rng.choice(CAMERAS)
            for t in range(length):
                if time.perf_counter() >= t_end or state["n"] >= max_requests:
                    conn.close()
                    return
                if rate:
                    await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
                    nxt += 1 / rate
                if t % 10 == 9:
                    kind = "episode"
                    path = rng.choice(
                        [
                            f"/api/episodes/{group}/{ep}",
                            f"/api/episodes/{group}/{ep}/steps?start={t}&stop={t + 50}",
                            "/api/episodes?limit=50",
                        ]
                    )
                else:
                    kind, path = "frame", f"/api/episodes/{group}/{ep}/frames/{cam}/{t}"
                state["n"] += 1
                t0 = time.perf_counter()
                status, body = await conn.get(path)
                lat[kind].append(time.perf_counter() - t0)
                state["bytes"] += len(body)
                state["errors"] += status != 200

    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return {"lat": lat, "wall": time.perf_counter() - t0, **state}


def watch(port: int, episodes: list, clients: int, seconds: float, fps: float, mjpeg: bool, results) -> None:
    own_session(True)
    results.put(asyncio.run(_watch(port, episodes, clients, seconds, fps, mjpeg)))


async def _watch(port: int, episodes: list, clients: int, seconds: float, fps: float, mjpeg: bool) -> dict:
    """What an open dashboard page does: live updates (SSE), and for each episode it opens,
    its metadata, steps and two contact sheets, then it plays the episode at `fps` in the
    browser (no requests). With `mjpeg`, each viewer also streams one camera as MJPEG at
    `fps` while it plays (the server then sends every frame)."""
    lat: list[float] = []
    frames = [0]
    events = [0]
    t_end = time.perf_counter() + seconds

    async def viewer(k: int) -> None:
        rng, conn = random.Random(k), Conn(port)
        await asyncio.sleep(rng.random())  # people do not all click at once
        sse = asyncio.create_task(
            Conn(port).stream("/api/stream", t_end, lambda n: events.__setitem__(0, events[0] + 1))
        )
        while time.perf_counter() < t_end:
            group, ep, length = rng.choice(episodes)
            for path in (
                f"/api/episodes/{group}/{ep}",
                f"/api/episodes/{group}/{ep}/steps",
                *(f"/api/episodes/{group}/{ep}/sheet/{c}" for c in CAMERAS),
            ):
                t0 = time.perf_counter()
                await conn.get(path)
                lat.append(time.perf_counter() - t0)
            until = min(t_end, time.perf_counter() + length / fps)
            cam = rng.choice(CAMERAS)
            if mjpeg:
                await Conn(port).stream(
                    f"/api/episodes/{group}/{ep}/video/{cam}?fps={fps}",
                    until,
                    lambda n: frames.__setitem__(0, frames[0] + 1),
                )
            else:
                await asyncio.sleep(max(0.0, until - time.perf_counter()))
        conn.close()
        await sse

    t0 = time.perf_counter()
    await asyncio.gather(*(viewer(k) for k in range(clients)))
    wall = time.perf_counter() - t0
    return {"lat": lat, "wall": wall, "frames": frames[0], "events": events[0]}


# -- orchestration ------------------------------------------------------------------------------
def in_process(ctx, target, *args, timeout: float) -> dict:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    out = q.get(timeout=timeout + 120)
    p.join(30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the load generator, now reaped
    out["client_cpu"] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / out["wall"]
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q)) if xs else float("nan")


def train_rate(samples: list[tuple[float, int, float]], t0: float, t1: float) -> tuple[float, float]:
    """(steps per wall second, steps per CPU second of the trainer) between t0 and t1."""
    inside = [x for x in samples if t0 <= x[0] <= t1]
    if len(inside) < 2:
        return float("nan"), float("nan")
    (ta, sa, ca), (tb, sb, cb) = inside[0], inside[-1]
    return (sb - sa) / (tb - ta), (sb - sa) / max(cb - ca, 1e-9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=8.0, help="length of the saturation run")
    ap.add_argument("--max-requests", type=int, default=100_000)
    ap.add_argument("--window", type=float, default=4.0, help="length of each training window")
    ap.add_argument("--rounds", type=int, default=5, help="alone/loaded window pairs")
    ap.add_argument("--viewer-fps", type=float, default=10.0)
    ap.add_argument("--nice", type=int, default=0, help="niceness of the dashboard process")
    ap.add_argument(
        "--client-nice",
        type=int,
        default=10,
        help="niceness of the load generator (it stands in for browsers elsewhere)",
    )
    ap.add_argument("--mjpeg", action="store_true", help="viewers also stream one camera as MJPEG while they play")
    ap.add_argument(
        "--same-session", action="store_true", help="run the dashboard in the training loop's session (autogroup)"
    )
    ap.add_argument("--episodes", type=int, default=8, help="per group (two groups)")
    ap.add_argument("--length", type=int, default=150)
    ap.add_argument("--size", type=int, default=96, help="camera image height = width")
    args = ap.parse_args()

    from services.dashboard.server import free_port

    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        t = time.perf_counter()
        run = make_run(Path(tmp) / "run", episodes=args.episodes, length=args.length, size=args.size, metric_rows=2000)
        print(
            f"run: {2 * args.episodes} episodes x ~{args.length} steps, cameras {CAMERAS} at {args.size}x{args.size} "
            f"({time.perf_counter() - t:.1f} s to write)"
        )
        episodes = [
            (g, i, args.length + (i if g == "real" else 0)) for g in ("demo", "real") for i in range(args.episodes)
        ]
        port = free_port()
        server = ctx.Process(target=serve, args=(str(run), port, args.nice, not args.same_session), daemon=True)
        server.start()
        _wait_up(f"http://127.0.0.1:{port}")
        os.nice(args.client_nice)  # the load generators are spawned from here and inherit it

        # 1. saturation
        in_process(ctx, saturate, port, episodes, args.clients, 2.0, 10_000, None, timeout=2)  # warm-up
        cpu0 = cpu_seconds(server.pid)
        sat = in_process(
            ctx, saturate, port, episodes, args.clients, args.seconds, args.max_requests, None, timeout=args.seconds
        )
        dash_cpu = (cpu_seconds(server.pid) - cpu0) / sat["wall"]
        n = len(sat["lat"]["frame"]) + len(sat["lat"]["episode"])
        print(
            f"\n1. saturation: {args.clients} closed-loop clients for {sat['wall']:.1f} s "
            f"(dashboard nice {args.nice}, clients nice {args.client_nice})"
        )
        print(
            f"   {n} requests, {n / sat['wall']:.0f} req/s, {sat['bytes'] / sat['wall'] / 2**20:.1f} MiB/s, "
            f"{sat['errors']} errors"
        )
        print(f"   CPU: dashboard {dash_cpu:.2f} cores, load generator {sat['client_cpu']:.2f} cores")
        for kind in ("frame", "episode"):
            xs = sat["lat"][kind]
            print(
                f"   {kind:8s} n={len(xs):6d}  p50 {pct(xs, 50):6.1f} ms  p99 {pct(xs, 99):6.1f} ms  "
                "(target p99 < 50 ms)"
            )
        cpu0 = cpu_seconds(server.pid)
        paced = in_process(
            ctx,
            saturate,
            port,
            episodes,
            args.clients,
            args.seconds,
            args.max_requests,
            args.viewer_fps,
            timeout=args.seconds,
        )
        dash_cpu = (cpu_seconds(server.pid) - cpu0) / paced["wall"]
        n = len(paced["lat"]["frame"]) + len(paced["lat"]["episode"])
        print(
            f"\n   paced: {args.clients} clients at {args.viewer_fps:.0f} requests/s each "
            f"(a per-frame player at {args.viewer_fps:.0f} fps): "
            f"{n / paced['wall']:.0f} req/s, {paced['errors']} errors"
        )
        print(f"   CPU: dashboard {dash_cpu:.2f} cores, load generator {paced['client_cpu']:.2f} cores")
        for kind in ("frame", "episode"):
            xs = paced["lat"][kind]
            print(
                f"   {kind:8s} n={len(xs):6d}  p50 {pct(xs, 50):6.1f} ms  p99 {pct(xs, 99):6.1f} ms  "
                "(target p99 < 50 ms)"
            )

        # 2. training alone vs with viewers, alternated; then vs the saturation load
        stop, samples_q = ctx.Event(), ctx.Queue()
        trainer = ctx.Process(target=train, args=(str(run), stop, samples_q), daemon=True)
        trainer.start()
        samples: list = []
        _collect(samples_q, samples, 8.0)  # torch import and cache fill
        alone, watched, watch_lat, watch_cpu, client_cpu, frames, events = [], [], [], [], [], 0, 0
        for _ in range(args.rounds):
            t0 = time.time()
            _collect(samples_q, samples, args.window)
            alone.append(train_rate(samples, t0 + 0.3, time.time()))
            t0, cpu0 = time.time(), cpu_seconds(server.pid)
            out = in_process(
                ctx,
                watch,
                port,
                episodes,
                args.clients,
                args.window + 1.0,
                args.viewer_fps,
                args.mjpeg,
                timeout=args.window,
            )
            watch_cpu.append((cpu_seconds(server.pid) - cpu0) / (time.time() - t0))
            _collect(samples_q, samples, 0.1)
            watched.append(train_rate(samples, t0 + 1.5, t0 + 1.0 + out["wall"]))
            client_cpu.append(out["client_cpu"])
            watch_lat += out["lat"]
            frames += out["frames"]
            events += out["events"]
        t0 = time.time()
        out = in_process(
            ctx, saturate, port, episodes, args.clients, args.window, args.max_requests, None, timeout=args.window
        )
        _collect(samples_q, samples, 0.1)
        saturated = train_rate(samples, t0 + 1.0, t0 + 0.5 + out["wall"])
        stop.set()
        trainer.join(10)
        server.terminate()
        server.join(10)

    a, w = float(np.nanmean([x[0] for x in alone])), float(np.nanmean([x[0] for x in watched]))
    a_cpu, w_cpu = float(np.nanmean([x[1] for x in alone])), float(np.nanmean([x[1] for x in watched]))
    pairs = [x[0] / y[0] for x, y in zip(watched, alone)]
    saturated, saturated_cpu = saturated
    per_viewer = frames / (args.rounds * (args.window + 1.0)) / args.clients
    print(
        "\n2. training loop (store sampling of image transitions + torch MLP, batch 256, 1 thread), "
        f"{args.rounds} alternated {args.window:.0f} s windows"
    )
    print(
        f"   alone:                 {a:7.1f} steps/s   windows {', '.join(f'{x[0]:.1f}' for x in alone)}   "
        f"{a_cpu:.1f} steps per trainer CPU-second"
    )
    print(
        f"   with {args.clients} open pages:   {w:7.1f} steps/s   "
        f"windows {', '.join(f'{x[0]:.1f}' for x in watched)}   {w_cpu:.1f} steps per trainer CPU-second"
    )
    how = (
        f"an MJPEG stream at {args.viewer_fps:.0f} fps ({per_viewer:.1f} frames/s received per viewer)"
        if args.mjpeg
        else f"played in the browser at {args.viewer_fps:.0f} fps"
    )
    print(f"      (each page: live updates; per episode opened: metadata + steps + 2 contact sheets, {how};")
    print(
        f"       {events} live events received; "
        f"request p50 {pct(watch_lat, 50):.1f} ms, p99 {pct(watch_lat, 99):.1f} ms;"
    )
    print(f"       CPU: dashboard {np.mean(watch_cpu):.2f} cores, load generator {np.mean(client_cpu):.2f} cores)")
    print(f"   under saturation:      {saturated:7.1f} steps/s   {saturated_cpu:.1f} steps per trainer CPU-second")
    print(
        f"   RATIO with {args.clients} open pages / alone: {w / a:.3f}  "
        f"(slowdown {100 * (1 - w / a):+.1f}%, target < 5%; median of paired windows {np.median(pairs):.3f})"
    )
    print(f"   per trainer CPU-second (interference only, not scheduling): {w_cpu / a_cpu:.3f}")
    print(f"   ratio under saturation / alone:   {saturated / a:.3f}  (slowdown {100 * (1 - saturated / a):+.1f}%)")
    where = "its own session" if not args.same_session else "the training loop's session"
    print(
        f"dashboard in {where}; machine: {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} (other jobs share it)"
    )


def _collect(q, out: list, seconds: float) -> None:
    import queue

    end = time.time() + seconds
    while time.time() < end:
        try:
            out.append(q.get(timeout=max(0.01, end - time.time())))
        except queue.Empty:
            pass
    while True:  # drain what is already there
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return


def _wait_up(url: str) -> None:
    import httpx

    for _ in range(300):
        try:
            if httpx.get(url + "/api/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the dashboard did not come up on {url}")


if __name__ == "__main__":
    main()
