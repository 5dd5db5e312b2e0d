"""Transport-independent core: decoders, stream buffers, limits, the state machine."""

import time

import numpy as np
import pytest

from robot_bridge.codec import Header, Image, JointState, Time, encode
from robot_bridge.core import decoders
from robot_bridge.core.limits import ActionLimiter
from robot_bridge.core.state import EpisodeStateMachine, Event, State, Transition
from robot_bridge.core.streams import Sample, StreamBuffer, StreamInput
from robot_bridge.errors import MessageRejected
from robot_bridge.profile import ActionSpec, load_profile
from robot_bridge.sim_robot import image_step, synthetic_image
from tests.bridge.helpers import SIM_PROFILE


def img(enc="rgb8", h=2, w=3, ch=3, step=None, n=None, stamp=5):
    step = step if step is not None else w * ch
    data = np.arange(n if n is not None else step * h, dtype=np.uint8)
    return Image(header=Header(Time.from_ns(stamp)), height=h, width=w, encoding=enc, step=step, data=data)


def test_image_encodings():
    stamp, rgb = decoders.image_array(img(), 2, 3, 3)
    assert stamp == 5 and rgb.shape == (2, 3, 3) and rgb[0, 1].tolist() == [3, 4, 5]
    _, bgr = decoders.image_array(img("bgr8"), 2, 3, 3)
    assert bgr[0, 1].tolist() == [5, 4, 3]
    _, rgba = decoders.image_array(img("rgba8", ch=4), 2, 3, 3)
    assert rgba[0, 1].tolist() == [4, 5, 6]
    _, mono = decoders.image_array(img("mono8", ch=1), 2, 3, 3)
    assert mono.shape == (2, 3, 3) and mono[0, 1].tolist() == [1, 1, 1]
    _, padded = decoders.image_array(img(step=10), 2, 3, 3)  # row padding is dropped
    assert padded[1, 0].tolist() == [10, 11, 12]


@pytest.mark.parametrize("msg,reason", [
    (img("bgr16"), "wrong_encoding"),
    (img(h=4), "wrong_size"),
    (img(n=17), "wrong_size"),
    (img(step=5), "wrong_size"),
])
def test_bad_images_rejected(msg, reason):
    with pytest.raises(MessageRejected) as e:
        decoders.image_array(msg, 2, 3, 3)
    assert e.value.reason == reason


def test_joints():
    m = JointState(
        header=Header(Time.from_ns(9)), name=["b", "a"], position=np.array([2.0, 1.0]), velocity=np.array([20.0, 10.0])
    )
    stamp, v = decoders.joint_array(m, ["a", "b"], ["position", "velocity"])
    assert stamp == 9 and v.tolist() == [1.0, 2.0, 10.0, 20.0] and v.dtype == np.float32
    for bad, reason in [
        (JointState(name=["a"], position=np.array([1.0])), "missing_joint"),
        (JointState(name=["a", "b"], position=np.array([1.0])), "wrong_size"),
        (JointState(name=["a", "b"], position=np.array([1.0, np.nan])), "non_finite"),
    ]:
        with pytest.raises(MessageRejected) as e:
            decoders.joint_array(bad, ["a", "b"], ["position"])
        assert e.value.reason == reason


def test_buffer_alignment_and_order():
    b = StreamBuffer(depth=4)
    for t in (10, 20, 30):
        b.push(Sample(t, t, np.array([t])))
    assert b.at(5) is None and b.at(10).stamp_ns == 10 and b.at(29).stamp_ns == 20 and b.at(99).stamp_ns == 30
    for t, reason in ((30, "duplicate_stamp"), (25, "out_of_order")):
        with pytest.raises(MessageRejected) as e:
            b.push(Sample(t, t, np.array([t])))
        assert e.value.reason == reason
    for t in range(40, 200, 10):  # bounded memory
        b.push(Sample(t, t, np.array([t])))
    assert len(b._stamps) <= 8 and b.latest().stamp_ns == 190


def test_stream_input_counts_every_rejection():
    inp = StreamInput("image_c", "sensor_msgs/msg/Image", lambda m: decoders.image_array(m, 2, 3, 3))
    now = 10**18
    inp(encode(img(stamp=now)), now)
    inp(encode(img(stamp=now)), now)  # duplicate
    inp(encode(img(stamp=now - 5)), now)  # out of order
    inp(encode(img("bgr16", stamp=now + 1)), now)
    inp(encode(img(stamp=now + 5_000_000_000)), now)  # 5 s in the future
    inp(b"\x00\x01\x00\x00\x05", now)  # malformed
    c = inp.counters
    assert c.received == 6 and c.accepted == 1
    assert dict(c.rejected) == {
        "duplicate_stamp": 1,
        "out_of_order": 1,
        "wrong_encoding": 1,
        "stamp_in_future": 1,
        "malformed": 1,
    }
    assert inp.buffer.latest().stamp_ns == now


def test_limiter():
    lim = ActionLimiter(ActionSpec(low=[-1, -1], high=[1, 0.5], max_delta=0.4))
    np.testing.assert_allclose(lim([2.0, 2.0]), [0.4, 0.4])  # delta from hold (0)
    np.testing.assert_allclose(lim([2.0, 2.0]), [0.8, 0.5])  # bounds
    np.testing.assert_allclose(lim([np.nan, 0.0]), [0.8, 0.5])  # any NaN -> the whole previous action
    assert lim.non_finite == 1 and lim.clipped == 2
    lim.reset()
    np.testing.assert_allclose(lim([0.1, 0.1]), [0.1, 0.1])


def test_state_machine():
    sm = EpisodeStateMachine()
    with pytest.raises(Transition):
        sm.fire(Event.END)
    assert sm.fire(Event.START) == State.RESETTING
    assert sm.fire(Event.RESET_DONE) == State.RUNNING
    assert sm.fire(Event.INTERVENE) == State.INTERVENED and sm.active
    assert sm.fire(Event.RELEASE) == State.RUNNING
    assert sm.fire(Event.RERECORD) == State.RESETTING
    sm.fire(Event.RESET_DONE)
    assert sm.fire(Event.FAULT) == State.FAULTED
    with pytest.raises(Transition):
        sm.fire(Event.RESET_DONE)
    assert sm.fire(Event.CLEAR) == State.IDLE and sm.refused == 2


def test_synthetic_image_encodes_step():
    base = np.zeros((4, 5, 3), np.uint8)
    assert image_step(synthetic_image(4, 5, 123456, base)) == 123456


def test_profile_loads_and_rejects(tmp_path):
    p = load_profile(SIM_PROFILE)
    assert set(p.obs_specs()) == {"image_corner", "proprio", "state"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(SIM_PROFILE.read_text().replace("high: [1, 1, 1, 1]", "high: [1, 1]"))
    from robot_bridge.errors import ProfileError

    with pytest.raises(ProfileError, match="action"):
        load_profile(bad)


def test_recorder_overrun_drops_the_episode_not_steps(tmp_path):
    from robot_bridge.core.recorder import Recorder
    from worldsample.store import EpisodeStore, GroupSchema, KeySpec
    from worldsample.store.verify import verify_store

    schema = GroupSchema.build({"proprio": KeySpec(dtype="float32", shape=(2,), finite=True)}, 2, chunk_len=4)
    rec = Recorder(tmp_path, "real", schema, max_backlog=3)
    step = {"proprio": np.zeros(2, np.float32), "action": np.zeros(2, np.float32), "reward": 0.0}
    rec._do_sleep = lambda _: time.sleep(0.3)
    rec._q.put(("sleep", None))  # stall the recorder thread so steps pile up
    rec.begin()
    for _ in range(10):
        rec.step(step, 0)
    rec.end(True, {})
    while rec.backlog:
        time.sleep(0.01)
    rec.begin()
    for _ in range(2):
        rec.step(step, 0)
    rec.end(True, {})
    rec.close()
    assert rec.stats.overruns == 1 and rec.stats.committed == 1 and rec.stats.spoiled == 1
    assert [r.length for r in EpisodeStore(tmp_path).reader("real", cache=False).episode_records()] == [2]
    assert verify_store(tmp_path).ok
