"""`store info` and `store verify`: summaries, and a full consistency check of committed data."""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worldsample.errors import StoreError
from worldsample.store.store import EpisodeStore


def dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total


@dataclass
class GroupInfo:
    name: str
    episodes: int
    steps: int
    success_rate: float
    interventions: int
    bytes_on_disk: int
    cameras: list[str]
    writer_active: bool


def store_info(run_dir: Path) -> list[GroupInfo]:
    store = EpisodeStore(run_dir)
    out = []
    for g in store.groups:
        r = store.reader(g, cache=False)
        recs = r.episode_records()
        out.append(
            GroupInfo(
                name=g,
                episodes=len(recs),
                steps=sum(x.length for x in recs),
                success_rate=float(np.mean([x.success for x in recs])) if recs else 0.0,
                interventions=sum(x.interventions for x in recs),
                bytes_on_disk=dir_size(store.root / g),
                cameras=r.schema.cameras,
                writer_active=store.writer_active(g),
            )
        )
    return out


@dataclass
class VerifyReport:
    episodes: int = 0
    steps: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_store(run_dir: Path, progress=None) -> VerifyReport:
    """Read every committed episode and check it against its record and the schema.

    `progress(n)` is called after each episode (for a progress bar)."""
    rep = VerifyReport()
    try:
        store = EpisodeStore(run_dir)
    except StoreError as e:
        rep.problems.append(str(e))
        return rep
    for g in store.groups:
        try:
            r = store.reader(g, cache=False)
        except StoreError as e:
            rep.problems.append(f"{g}: {e}")
            continue
        for i, why in sorted(r.damaged.items()):
            rep.problems.append(f"{g}/episode {i}: set aside by readers: {why}")
        c = r.schema.chunk_len
        prev_end = -1
        for rec in r.episode_records():
            where = f"{g}/episode {rec.episode}"
            if rec.start % c:
                rep.problems.append(f"{where}: start slot {rec.start} is not aligned to chunk length {c}")
            if rec.start < prev_end:
                rep.problems.append(
                    f"{where}: slots {rec.start}..{rec.end} overlap the previous episode (ends {prev_end})"
                )
            prev_end = math.ceil(rec.end / c) * c
            try:
                data = r.episode(rec.episode, verify=False)  # the checksums are compared below, key by key
            except Exception as e:  # any decode failure is a finding, not a crash
                rep.problems.append(f"{where}: data unreadable: {type(e).__name__}: {e}")
                continue
            for key, arr in data.items():
                if len(arr) != rec.length:
                    rep.problems.append(f"{where}: {key} has {len(arr)} steps, record says {rec.length}")
                want = rec.checksums.get(key)
                if want is None:
                    rep.problems.append(f"{where}: record has no checksum for {key}")
                elif zlib.crc32(np.ascontiguousarray(arr).data) != want:
                    rep.problems.append(f"{where}: {key} does not match its checksum (data changed after commit)")
                spec = r.schema.keys[key]
                if spec.finite and arr.dtype.kind == "f" and not np.isfinite(arr).all():
                    rep.problems.append(f"{where}: {key} holds NaN or inf")
            ret = float(data["reward"].sum(dtype=np.float64))
            if not math.isclose(ret, rec.episode_return, rel_tol=1e-4, abs_tol=1e-4):
                rep.problems.append(f"{where}: return {ret:.6g} differs from record {rec.episode_return:.6g}")
            if data["done"][:-1].any():
                rep.problems.append(f"{where}: done is set before the last step")
            if bool(data["done"][-1]) != rec.terminated:
                rep.problems.append(
                    f"{where}: last done flag {bool(data['done'][-1])} != record terminated {rec.terminated}"
                )
            if int(data["intervention"].sum()) != rec.interventions:
                rep.problems.append(
                    f"{where}: {int(data['intervention'].sum())} intervention steps, record says {rec.interventions}"
                )
            rep.episodes += 1
            rep.steps += rec.length
            if progress:
                progress(1)
    return rep
