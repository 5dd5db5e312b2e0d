"""RUN/status.json: several services update their own parts without losing each other's."""

from __future__ import annotations

import multiprocessing as mp

from worldsample.runlog import RobotState, StatusFile


def _beat(run_dir: str, name: str, n: int) -> None:
    st = StatusFile(run_dir)
    for i in range(n):
        st.heartbeat(name, detail=f"beat {i}")


def test_concurrent_services_keep_their_entries(tmp_path):
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_beat, args=(str(tmp_path), f"svc{k}", 40)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    st = StatusFile(tmp_path).read()
    assert set(st.services) == {"svc0", "svc1", "svc2"}
    assert all(s.detail == "beat 39" for s in st.services.values())


def test_fields_and_unreadable_file(tmp_path):
    sf = StatusFile(tmp_path)
    assert sf.read() is None
    sf.heartbeat("bridge", learner_step=None, robot=RobotState(connected=True, estop=True))
    st = sf.read()
    assert st.robot.estop and st.services["bridge"].state == "running"
    (tmp_path / "status.json").write_text("{not json")
    assert sf.read() is None
    sf.heartbeat("trainer", learner_step=7)  # an unreadable file is replaced, not fatal
    assert sf.read().learner_step == 7
