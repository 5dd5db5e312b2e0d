"""Cost of a camera frame's crop and resize (worldsample/frames.py) against baselines in the same run.

For a 640x480 RGB frame: FrameGeometry.apply to 64x64 (the whole frame, and the centre 480x480
crop) and to 84x84 from the crop; baselines measured interleaved with them, in rounds, so load from
other processes hits all alike: a plain copy of the frame (memory traffic, the floor) and Pillow's
BOX resize of the same crop (C code; box-filtered but not an exact area average). Per case: the
median over rounds of the mean per frame, in CPU time of this process (less sensitive to other
load) and in wall time. Then the bridge's whole input path for one rgb8 message: CDR decode,
crop and resize, checks.

    .venv/bin/python bench/frames.py [--rounds 15] [--frames 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, as the bridge's camera callback gets
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from worldsample.frames import CropBox, FrameGeometry  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--frames", type=int, default=50)
    args = ap.parse_args()
    from PIL import Image as PILImage

    frame = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    centre = CropBox(0, 80, 480, 480)
    whole, crop64, crop84 = (FrameGeometry((480, 640), (64, 64)), FrameGeometry((480, 640), (64, 64), centre),
                             FrameGeometry((480, 640), (84, 84), centre))
    cases = {
        "copy of the 640x480 frame (baseline)": frame.copy,
        "Pillow BOX 480x480 crop -> 64x64 (baseline)": lambda: np.asarray(
            PILImage.fromarray(frame).resize((64, 64), PILImage.Resampling.BOX, box=(80, 0, 560, 480))),
        "640x480 -> 64x64": lambda: whole.apply(frame),
        "640x480 -> crop 480x480 -> 64x64": lambda: crop64.apply(frame),
        "640x480 -> crop 480x480 -> 84x84": lambda: crop84.apply(frame),
        "bridge input, one 640x480 rgb8 message -> 64x64": _bridge_input(frame, centre),
    }
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    wall: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()  # warm up (plans are cached per size)
    for _ in range(args.rounds):
        for name, fn in cases.items():
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(args.frames):
                fn()
            cpu[name].append((time.process_time() - c0) / args.frames * 1e3)
            wall[name].append((time.perf_counter() - w0) / args.frames * 1e3)
    base = float(np.median(cpu["copy of the 640x480 frame (baseline)"]))
    print(f"{'case':52s} {'CPU ms':>8s} {'wall ms':>8s} {'x copy':>7s}")
    for name in cases:
        c, w = float(np.median(cpu[name])), float(np.median(wall[name]))
        print(f"{name:52s} {c:8.3f} {w:8.3f} {c / base:7.1f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def _bridge_input(frame: np.ndarray, crop: CropBox):
    from robot_bridge.codec import Header, Image, Time, default_types, encode
    from robot_bridge.core import decoders

    raw = encode(Image(header=Header(Time.from_ns(1)), height=480, width=640, encoding="rgb8", step=640 * 3,
                       data=frame.reshape(-1)))
    g = FrameGeometry((480, 640), (64, 64), crop)
    types = default_types()
    return lambda: decoders.image_array(types.decode(raw, "sensor_msgs/msg/Image"), 480, 640, 3, g)


if __name__ == "__main__":
    main()
