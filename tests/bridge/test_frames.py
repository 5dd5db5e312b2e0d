"""Camera frames from native size to policy size (worldsample/frames.py) through the bridge's own
input path: 640x480 rgb8, bgr8 and JPEG frames cropped and area-resized to 64x64, checked on a
picture whose content is known; bad crop boxes refused at profile load; wrong sizes rejected and
counted; the resize against an independent exact area average."""

import io
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image as PILImage

from robot_bridge.bridge import stream_converter
from robot_bridge.codec import CompressedImage, Header, Image, Time, encode
from robot_bridge.core.streams import StreamInput
from robot_bridge.errors import ProfileError
from robot_bridge.profile import load_profile
from tests.bridge.helpers import small_profile
from worldsample import frames
from worldsample.frames import CropBox, FrameGeometry, FrameSizeError, area_resize

STAMP = 1_700_000_000_000_000_000
NATIVE = {"height": 480, "width": 640}
CROP = {"top": 0, "left": 80, "height": 480, "width": 480}  # the centre square: 7.5 native pixels per output pixel
BG, RECT, WHITE = (10, 20, 30), (200, 50, 100), (250, 250, 250)


def resize_profile(tmp_path, **changes):
    return load_profile(small_profile(tmp_path, **{
        "cameras.0.height": 64, "cameras.0.width": 64, "cameras.0.native": NATIVE, "cameras.0.crop": CROP,
        **changes}))


def scene(bg=BG) -> np.ndarray:
    """640x480 RGB: a rectangle inside the crop on output-pixel boundaries, a 4-pixel white band at
    the crop's left edge (4/7.5 of output column 0), green blocks outside the crop that must vanish."""
    f = np.empty((480, 640, 3), np.uint8)
    f[:] = bg
    f[120:240, 200:320] = RECT  # crop-local rows and columns 120..240 -> output 16..32
    f[:, 80:84] = WHITE
    f[:, 0:60] = (0, 255, 0)
    f[300:, 600:] = (0, 255, 0)
    return f


def expected(bg=BG) -> np.ndarray:
    """What area averaging must make of scene(bg), worked out by hand."""
    out = np.empty((64, 64, 3), np.float64)
    out[:] = bg
    out[16:32, 16:32] = RECT
    out[:, 0] = (4 * np.array(WHITE) + 3.5 * np.array(bg)) / 7.5
    return np.floor(out + 0.5).astype(np.uint8)


def raw_image(frame: np.ndarray, encoding: str = "rgb8", stamp: int = STAMP) -> bytes:
    h, w, ch = frame.shape
    wire = frame[:, :, ::-1] if encoding.startswith("bgr") else frame
    return encode(Image(header=Header(Time.from_ns(stamp)), height=h, width=w, encoding=encoding, step=w * ch,
                        data=np.ascontiguousarray(wire).reshape(-1)))


def jpeg(frame: np.ndarray, stamp: int = STAMP) -> bytes:
    buf = io.BytesIO()
    PILImage.fromarray(frame).save(buf, format="jpeg", quality=95, subsampling=0)
    return encode(CompressedImage(header=Header(Time.from_ns(stamp)), format="jpeg",
                                  data=np.frombuffer(buf.getvalue(), np.uint8)))


def bridge_input(profile) -> StreamInput:
    """The camera's StreamInput as the bridge (and bag import, and robot check) builds it."""
    cam = profile.cameras[0]
    return StreamInput(cam.key, cam.type, stream_converter(cam, profile), decode=profile.msg_types.decode)


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8"])
def test_raw_640x480_is_cropped_and_resized_to_64x64(tmp_path, encoding):
    profile = resize_profile(tmp_path)
    inp = bridge_input(profile)
    inp(raw_image(scene(), encoding), STAMP + 1_000_000)
    assert inp.counters.accepted == 1, (inp.counters.as_dict(), inp.last_reject)
    out = inp.buffer.latest().value
    assert out.shape == (64, 64, 3) and out.dtype == np.uint8 and out.flags.c_contiguous
    assert profile.obs_specs()["image_corner"].shape == (64, 64, 3)
    np.testing.assert_array_equal(out, expected())


def test_jpeg_640x480_is_cropped_and_resized_to_64x64(tmp_path):
    profile = resize_profile(tmp_path, **{"cameras.0.type": "sensor_msgs/msg/CompressedImage"})
    inp = bridge_input(profile)
    inp(jpeg(scene()), STAMP + 1_000_000)
    assert inp.counters.accepted == 1, (inp.counters.as_dict(), inp.last_reject)
    out = inp.buffer.latest().value.astype(int)
    want = expected().astype(int)
    assert out.shape == (64, 64, 3)
    assert np.abs(out - want).mean() < 1.0 and np.abs(out - want).max() <= 8  # JPEG is lossy, a little
    rect = np.abs(out - RECT).max(axis=2) < 12
    assert rect[16:32, 16:32].all() and rect.sum() == 16 * 16  # where it must be, and nowhere else
    assert (np.abs(out[:, 1:] - BG).max(axis=2) < 12).sum() == 64 * 63 - 16 * 16  # no green from outside the crop


def test_wrong_native_size_is_rejected_and_counted(tmp_path):
    profile = resize_profile(tmp_path)
    inp = bridge_input(profile)
    small = scene()[::2, ::2].copy()  # 320x240
    inp(raw_image(small), STAMP)
    assert inp.counters.rejected["wrong_size"] == 1 and inp.counters.accepted == 0
    assert inp.last_reject[0] == "320x240, profile says native 640x480 (stored as 64x64)"
    inp(raw_image(np.zeros((64, 64, 3), np.uint8)), STAMP)  # already the stored size: still not the native one
    assert inp.counters.rejected["wrong_size"] == 2
    inp(raw_image(scene()), STAMP)
    assert inp.counters.accepted == 1 and inp.buffer.latest().value.shape == (64, 64, 3)

    jp = resize_profile(tmp_path, **{"cameras.0.type": "sensor_msgs/msg/CompressedImage"})
    inp = bridge_input(jp)
    inp(jpeg(small), STAMP)
    assert inp.counters.rejected["wrong_size"] == 1
    assert inp.last_reject[0] == "320x240, profile says native 640x480 (stored as 64x64)"


def test_a_profile_without_native_or_crop_stores_frames_as_they_come(tmp_path):
    profile = load_profile(small_profile(tmp_path))  # 32x32, no native, no crop
    cam = profile.cameras[0]
    assert cam.native_size == (32, 32) and cam.geometry.is_identity
    inp = bridge_input(profile)
    frame = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    inp(raw_image(frame), STAMP)
    np.testing.assert_array_equal(inp.buffer.latest().value, frame)
    inp(raw_image(scene()), STAMP)
    assert inp.last_reject[0] == "640x480, profile says 32x32"


@pytest.mark.parametrize(("changes", "why"), [
    ({"cameras.0.crop": {"top": 0, "left": 200, "height": 480, "width": 480}},
     "camera 'corner': crop box rows 0..480 x columns 200..680 leaves the native 640x480 frame"),
    ({"cameras.0.crop": {"top": 10, "left": 0, "height": 480, "width": 480}}, "rows 10..490"),
    ({"cameras.0.crop": {"top": -1, "left": 0, "height": 8, "width": 8}},
     "cameras.0.crop.top: Input should be greater than or equal to 0"),
    ({"cameras.0.crop": {"top": 0, "left": 0, "height": 8, "width": 0}}, "cameras.0.crop.width: Input should be "
                                                                         "greater than 0"),
    ({"cameras.0.native": {"height": 0, "width": 640}}, "cameras.0.native.height: Input should be greater than 0"),
    ({"cameras.0.native": None}, "leaves the native 64x64 frame (rows 0..64, columns 0..64); without `native` the "
                                 "camera must publish height x width"),
])
def test_bad_crop_boxes_and_sizes_are_refused_at_load(tmp_path, changes, why):
    with pytest.raises(ProfileError) as e:
        resize_profile(tmp_path, **changes)
    assert why in str(e.value)


def test_geometry_object():
    g = FrameGeometry((480, 640), (64, 64), CropBox(0, 80, 480, 480))
    assert g.describe() == "640x480 -> crop 480x480 at (80, 0) -> 64x64"
    assert g.to_output(120, 200) == (16.0, 16.0)
    squeezed = FrameGeometry((480, 640), (64, 64))
    assert squeezed.describe() == "640x480 -> 64x64 (aspect ratio x0.75)"
    with pytest.raises(FrameSizeError, match="320x240 frame, native size is 640x480"):
        g.apply(np.zeros((240, 320, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        g.apply(np.zeros((480, 640, 3), np.float32))
    frame = scene()
    assert FrameGeometry.identity(480, 640).apply(frame) is frame
    np.testing.assert_array_equal(g.apply(frame), expected())
    mono = g.apply(np.ascontiguousarray(frame[:, :, 0]))  # HxW in, HxW out
    np.testing.assert_array_equal(mono, expected()[:, :, 0])


# -- the resize itself --------------------------------------------------------------------------------
def _area_weights(n: int, m: int) -> np.ndarray:
    """(m, n): the share of native pixel i inside output pixel j, from the overlap of the intervals."""
    a, b = np.arange(m)[:, None] * n / m, np.arange(1, m + 1)[:, None] * n / m
    i = np.arange(n)[None, :]
    return np.clip(np.minimum(b, i + 1) - np.maximum(a, i), 0, None) / (n / m)


@pytest.mark.parametrize("column_pass", ["block matrix", "tap by tap"])
def test_resize_is_the_exact_area_average(monkeypatch, column_pass):
    if column_pass == "tap by tap":  # the path of very large periods (e.g. 4095 -> 64 columns)
        monkeypatch.setattr(frames, "_BLOCK_MAX", 0)
    rng = np.random.default_rng(7)
    sizes = [((480, 640), (64, 64)), ((480, 480), (84, 84)), ((37, 53), (64, 20)), ((7, 5), (3, 11)),
             ((64, 64), (64, 32)), ((1, 9), (1, 2))]
    for (h, w), (oh, ow) in sizes:
        for shape in ((h, w), (h, w, 1), (h, w, 3)):
            frame = rng.integers(0, 256, shape, dtype=np.uint8)
            rows = np.tensordot(_area_weights(h, oh), frame.astype(np.float64), axes=(1, 0))  # (oh, w, ...)
            exact = np.moveaxis(np.tensordot(_area_weights(w, ow), rows, axes=(1, 1)), 0, 1)  # (oh, ow, ...)
            out = area_resize(frame, oh, ow)
            assert out.shape == (oh, ow, *shape[2:]) and out.dtype == np.uint8
            # within float32 rounding of the exact mean (a half-level tie may round either way)
            assert np.abs(out - np.floor(exact + 0.5)).max() <= 1, (shape, oh, ow)
            assert np.abs(out - exact).max() <= 0.5 + 1e-3, (shape, oh, ow)
    view = rng.integers(0, 256, (480, 640, 4), dtype=np.uint8)[:, 80:560, 2::-1]  # strided, reversed channels
    np.testing.assert_array_equal(area_resize(view, 64, 64), area_resize(np.ascontiguousarray(view), 64, 64))


def test_downscale_is_anti_aliased_and_deterministic():
    checker = ((np.indices((480, 640)).sum(axis=0) % 2) * 255).astype(np.uint8)  # 1-pixel checkerboard
    out = area_resize(checker, 64, 64)
    assert np.abs(out.astype(int) - 127.5).max() <= 1  # grey, not a moire of 0 and 255 (nearest-neighbour)
    frame = np.random.default_rng(3).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    g = FrameGeometry((480, 640), (64, 64), CropBox(0, 80, 480, 480))
    first = g.apply(frame)
    for _ in range(3):
        np.testing.assert_array_equal(g.apply(frame), first)
    flat = np.full((480, 640, 3), 77, np.uint8)
    assert (g.apply(flat) == 77).all()


def test_import_is_light():
    code = ("import sys, worldsample.frames; heavy = {'torch', 'mujoco', 'PIL', 'cv2', 'scipy'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
