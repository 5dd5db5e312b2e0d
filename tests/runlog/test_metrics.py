"""RUN/metrics.jsonl: written by MetricsWriter, tailed tolerantly by MetricsReader."""

from __future__ import annotations

import math
import threading

import pytest

from worldsample.runlog import MetricsError, MetricsReader, MetricsWriter


def test_round_trip_and_nonfinite(tmp_path):
    with MetricsWriter(tmp_path) as w:
        w.log(1, {"loss/critic": 0.5}, time=10.0, flag=True)
        w.log(2, **{"loss/critic": float("nan"), "wm/psnr": 21})
        w.log(3, {"loss/critic": float("inf")})
    r = MetricsReader(tmp_path)
    rows = r.refresh()
    assert [row["step"] for row in rows] == [1, 2, 3] and rows[0]["time"] == 10.0
    steps, _, values = r.series("loss/critic")
    assert steps == [1, 2, 3] and values[0] == 0.5 and math.isnan(values[1]) and values[2] == math.inf
    assert r.series("flag")[2] == [1.0] and r.names() == ["flag", "loss/critic", "wm/psnr"]
    assert r.latest()["wm/psnr"] == (2, 21.0) and r.last_step == 3 and r.refresh() == []


@pytest.mark.parametrize(
    "bad", [{"step": 1.0}, {"time": 2.0}, {"has space": 1.0}, {"": 1.0}, {"x": "text"}, {"x": None}]
)
def test_writer_rejects_bad_rows(tmp_path, bad):
    with MetricsWriter(tmp_path) as w, pytest.raises(MetricsError):
        w.log(0, bad)


def test_partial_last_line_waits_and_malformed_lines_are_counted(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "time": 1.0, "a": 1}\nnot json\n[1, 2]\n{"step": "x", "time": 1, "a": 1}\n'
        '{"step": 2, "time": 2.0, "a": 2}\n{"step": 3, "ti'
    )
    r = MetricsReader(tmp_path)
    assert [row["step"] for row in r.refresh()] == [1, 2]
    assert r.malformed == 3
    with path.open("a") as f:
        f.write('me": 3.0, "a": 3}\n')
    assert [row["step"] for row in r.refresh()] == [3]
    assert r.series("a")[0] == [1, 2, 3] and r.malformed == 3


def test_file_replaced_by_a_shorter_one_starts_over(tmp_path):
    with MetricsWriter(tmp_path) as w:
        for i in range(10):
            w.log(i, a=i)
    r = MetricsReader(tmp_path)
    assert len(r.refresh()) == 10
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "time": 0, "a": 7}\n')
    assert len(r.refresh()) == 1 and r.series("a")[2] == [7.0] and r.rows == 1


def test_series_thinning_keeps_first_and_last(tmp_path):
    with MetricsWriter(tmp_path) as w:
        for i in range(1001):
            w.log(i, a=i)
    r = MetricsReader(tmp_path, max_points=300)
    r.refresh()
    steps, _, _ = r.series("a", max_points=10_000)
    assert len(steps) <= 300 and steps[0] == 0 and steps[-1] == 1000 and steps == sorted(steps)
    few = r.series("a", max_points=7)[0]
    assert len(few) <= 7 and few[-1] == 1000
    assert r.series("a", since_step=995)[0][0] > 995
    assert r.series("missing") == ([], [], [])


def test_concurrent_writers_never_interleave_lines(tmp_path):
    writers = [MetricsWriter(tmp_path) for _ in range(4)]

    def spam(k):
        for i in range(300):
            writers[k].log(i, {f"w{k}/value": i, "other": 1.0})

    threads = [threading.Thread(target=spam, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r = MetricsReader(tmp_path)
    assert len(r.refresh()) == 1200 and r.malformed == 0
    for w in writers:
        w.close()
