"""A writer process for crash and concurrency tests: commits deterministic episodes forever
(or `count` of them), printing `committed <id> <seed> <length>` after each commit."""

import sys
import time

from tests.store.helpers import make_episode
from worldsample.store import EpisodeStore


def main(run_dir: str, count: int, step_sleep: float) -> None:
    store = EpisodeStore(run_dir)
    with store.writer("demo") as w:
        print("ready", flush=True)
        for _ in range(count):
            eid = w.next_episode_id
            seed, length = 1000 + eid, 5 + (eid * 7) % 23
            data = make_episode(seed, length, terminal=eid % 2 == 0)
            ep = w.begin_episode()
            for t in range(length):
                ep.add_step({k: v[t] for k, v in data.items()})
                if step_sleep:
                    time.sleep(step_sleep)
            rec = ep.commit(extra={"seed": seed})
            print(f"committed {rec.episode} {seed} {length}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
