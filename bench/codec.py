"""CDR codec: the hand-written reference (bench/codec_handwritten.py) against rosbags'
serialize_cdr / deserialize_cdr, the path the bridge uses (robot_bridge/codec/typestore.py).

    .venv/bin/python bench/codec.py [--repeat 300]

Messages: a 640x480 rgb8 sensor_msgs/Image, a 7-joint sensor_msgs/JointState, a 4-value
Float32MultiArray (an action) and a std_msgs/String (status JSON). Decode takes the bytes as a
transport hands them over (`bytes`); rosbags is timed both as the bridge calls it (through a
memoryview, so arrays are views, not copies) and on plain `bytes` (rosbags slices them: one copy).
The ratio is hand-written speed over rosbags' (time rosbags / time hand-written): the issue keeps
a hand-written path only where that ratio is at least 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from robot_bridge.codec import Float32MultiArray, Header, Image, JointState, String, Time, default_types
from robot_bridge.codec.arrays import array_msg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.codec_handwritten import decode_handwritten, encode_handwritten  # noqa: E402


def messages() -> list[tuple[str, object]]:
    rng = np.random.default_rng(0)
    h = Header(Time.from_ns(1_700_000_000_123_456_789), "cam")
    img = Image(header=h, height=480, width=640, encoding="rgb8", step=640 * 3,
                data=rng.integers(0, 256, 480 * 640 * 3, dtype=np.uint8))
    js = JointState(header=h, name=[f"joint_{i}" for i in range(7)], position=rng.normal(size=7),
                    velocity=rng.normal(size=7), effort=rng.normal(size=7))
    act: Float32MultiArray = array_msg("std_msgs/msg/Float32MultiArray", rng.normal(size=4), "action")
    status = String(data='{"state": "running", "step": 12, "fault": null, "episodes": {"committed": 3}}')
    return [("Image 640x480 rgb8", img), ("JointState 7 joints", js), ("Float32MultiArray 4", act),
            ("String status", status)]


def per_call_us(fn, repeat: int) -> float:
    fn()  # rosbags compiles its (de)serialiser for a type on first use
    best = float("inf")
    for _ in range(3):  # best of three rounds: the least disturbed by other work on the machine
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    types = default_types()
    table = Table(title="CDR per call (us, best of 3 rounds); ratio = rosbags / hand-written")
    for col in ("message", "op", "hand-written", "rosbags (bridge)", "rosbags on bytes", "ratio", "hand >= 2x?"):
        table.add_column(col, justify="right" if col not in ("message", "op") else "left")
    for label, msg in messages():
        typename = msg.__typename__
        raw = encode_handwritten(msg)
        assert raw == types.encode(msg), f"{typename}: the two encoders disagree"
        store_msg = types.from_dataclass(msg)
        rows = [
            ("decode", lambda raw=raw, tn=typename: decode_handwritten(raw, tn),
             lambda raw=raw, tn=typename: types.decode(raw, tn),
             lambda raw=raw, tn=typename: types.store.deserialize_cdr(raw, tn)),
            ("encode", lambda m=msg: encode_handwritten(m), lambda m=msg: types.encode(m),
             lambda m=store_msg, tn=typename: types.store.serialize_cdr(m, tn)),
        ]
        for op, hand, ours, plain in rows:
            h, r, p = (per_call_us(f, args.repeat) for f in (hand, ours, plain))
            ratio = r / h
            table.add_row(label, op, f"{h:.1f}", f"{r:.1f}", f"{p:.1f}", f"{ratio:.2f}",
                          "[green]yes[/]" if ratio >= 2 else "no")
    Console().print(table)
    print("encode 'rosbags on bytes': serialize_cdr of a ready rosbags object (no dataclass conversion)")


if __name__ == "__main__":
    main()
