"""Bag import and `robot check` with a camera that publishes 640x480 and a profile that stores 64x64:
the store gets the cropped and resized frames (step k holds frame k), a frame of another size is
rejected and counted, and check shows native against stored sizes per camera."""

import numpy as np
from rich.console import Console
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robot_bridge.bag import _stream_message, import_bag
from robot_bridge.check import camera_lines, check_bag, render
from robot_bridge.codec import array_msg, encode
from tests.bridge.test_frames import expected, jpeg, raw_image, resize_profile, scene
from worldsample.store import EpisodeStore

T0 = 10**18
STEP = 50_000_000  # 20 Hz, the small profile's control rate
TICKS = 6
SMALL_AT = 3  # this tick's frame is 320x240


def bg(k: int) -> tuple[int, int, int]:
    return (10 + 20 * k, 20, 30)  # each frame its own background, to see which frame a step holds


def native_bag(path, profile, compressed: bool = False) -> None:
    """Sensors at each tick, the action 3 ms later (as a plain recorder writes them); camera frames
    640x480 but one 320x240."""
    ts = get_typestore(Stores.ROS2_JAZZY)
    cam = profile.cameras[0]
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {s.key: w.add_connection(s.topic, "sensor_msgs/msg/JointState" if s.key == "proprio" else s.type,
                                         typestore=ts) for s in profile.streams}
        act = w.add_connection(profile.action.topic, profile.action.type, typestore=ts)
        for k in range(TICKS):
            t = T0 + k * STEP
            frame = scene(bg(k))
            if k == SMALL_AT:
                frame = frame[::2, ::2].copy()
            w.write(conns[cam.key], t, jpeg(frame, t) if compressed else raw_image(frame, "rgb8", t))
            for s in profile.streams[1:]:
                w.write(conns[s.key], t, encode(_stream_message(s, np.full(profile.obs_specs()[s.key].shape, k,
                                                                           np.float32), t)))
            w.write(act, t + 3_000_000, encode(array_msg(profile.action.type, np.zeros(profile.action.dim), "a")))


def test_bag_import_stores_cropped_and_resized_frames(tmp_path):
    profile = resize_profile(tmp_path)
    native_bag(tmp_path / "bag", profile)
    rep = import_bag(tmp_path / "bag", tmp_path / "run", profile)
    cam = rep.topics["/cam/corner/image_raw"]
    assert (cam.received, cam.accepted, dict(cam.rejected)) == (TICKS, TICKS - 1, {"wrong_size": 1})
    assert rep.details["/cam/corner/image_raw"]["wrong_size"] == "wrong_size: 320x240, profile says native 640x480 " \
                                                                "(stored as 64x64)"
    store = EpisodeStore(tmp_path / "run")
    assert store.schema("real").keys["image_corner"].shape == (64, 64, 3)
    ep = store.reader("real").episode(0)
    assert ep["image_corner"].shape == (TICKS, 64, 64, 3)
    for k in range(TICKS):
        seen = k - 1 if k == SMALL_AT else k  # the rejected frame's tick sees the frame before it
        np.testing.assert_array_equal(ep["image_corner"][k], expected(bg(seen)), err_msg=f"step {k}")


def test_check_shows_native_and_stored_sizes(tmp_path):
    profile = resize_profile(tmp_path)
    native_bag(tmp_path / "bag", profile)
    rep = check_bag(profile, tmp_path / "bag")
    assert camera_lines(rep) == ["camera corner: native 640x480 -> crop 480x480 at (80, 0) -> stored 64x64x3 "
                                 "(area-average resize); published: 640x480 x5, 320x240 x1"]
    assert [p for p in rep.problems if p.startswith("/cam")] == [
        "/cam/corner/image_raw: the bridge would reject 1 of 6 message(s) as wrong_size: 320x240, profile says native "
        "640x480 (stored as 64x64)"]
    console = Console(record=True, width=300)
    render(rep, console)
    text = console.export_text()
    assert "camera corner: native 640x480 -> crop 480x480 at (80, 0) -> stored 64x64x3" in text
    assert "(native 640x480 rgb8|bgr8|rgba8|bgra8, stored 64x64)" in text

    jp = resize_profile(tmp_path, **{"cameras.0.type": "sensor_msgs/msg/CompressedImage", "cameras.0.crop": None})
    native_bag(tmp_path / "jpeg_bag", jp, compressed=True)
    rep = check_bag(jp, tmp_path / "jpeg_bag")
    assert camera_lines(rep) == ["camera corner: native 640x480 -> stored 64x64x3 (area-average resize, aspect "
                                 "ratio x0.75); published: 640x480 x5, 320x240 x1"]  # sizes read from the jpeg
