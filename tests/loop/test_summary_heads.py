"""The run summary reports the world model's success and done heads (issue 17, item 3): precision and
recall on the held-out windows in the printed summary and in metrics.jsonl, '-' / left out where a
score is undefined (nothing predicted, or no positive in the held-out windows)."""

from services.cli.train_cmd import head_scores, vector_fidelity_lines
from worldsample.loop.loop import _wm_scalars

REPORT = {
    "version": 3, "group": "real",
    "horizons": {"1": {"rmse_state": 0.002, "rmse_copy_state": 0.004}},
    "heads": {
        "success": {"threshold": 0.3, "precision": 0.5, "recall": 0.75, "positives": 4, "windows": 200},
        "done": {"threshold": 0.6, "precision": None, "recall": 0.0, "positives": 2, "windows": 200},
    },
}


def test_the_summary_line_names_each_heads_precision_and_recall():
    assert head_scores(REPORT["heads"]) == ("success precision 50% recall 75% (4 positives in 200 windows); "
                                            "done precision - recall 0% (2 positives in 200 windows)")


def test_the_heads_scores_go_to_the_metrics_where_defined():
    scalars = _wm_scalars(REPORT)
    assert scalars["wm_eval/h1/rmse_state"] == 0.002
    assert scalars["wm_eval/success_precision"] == 0.5 and scalars["wm_eval/success_recall"] == 0.75
    assert scalars["wm_eval/done_recall"] == 0.0 and "wm_eval/done_precision" not in scalars
    assert _wm_scalars({"horizons": {}}) == {}  # an older report without heads


def test_the_state_models_error_is_printed_per_part_against_copying():
    report = {"version": 2, "group": "real", "horizons": {
        "1": {"rmse_state": 0.002, "rmse_hand": 0.001, "rmse_goal": 0.0,
              "rmse_copy_state": 0.004, "rmse_copy_hand": 0.004, "rmse_copy_goal": 0.0},
        "8": {"rmse_state": 0.01, "rmse_hand": 0.006, "rmse_goal": 0.0,
              "rmse_copy_state": 0.02, "rmse_copy_hand": 0.03, "rmse_copy_goal": 0.0}}}
    assert vector_fidelity_lines(report) == [
        "world model v2 (no camera) rmse_state on held-out real episodes: 1 steps 0.0020 (copy 0.0040, 0.50x), "
        "8 steps 0.0100 (copy 0.0200, 0.50x)",
        "  rmse_hand: 1 steps 0.0010 (copy 0.0040, 0.25x), 8 steps 0.0060 (copy 0.0300, 0.20x)",
        "  rmse_goal: 1 steps 0.0000 (copy 0.0000), 8 steps 0.0000 (copy 0.0000)",
    ]


def test_the_constant_velocity_baseline_is_printed_beside_copying_where_reported():
    report = {"version": 4, "group": "real", "horizons": {
        "1": {"rmse_state": 0.002, "rmse_copy_state": 0.004, "rmse_velocity_state": 0.001}}}
    assert vector_fidelity_lines(report) == [
        "world model v4 (no camera) rmse_state on held-out real episodes: 1 steps 0.0020 (copy 0.0040, 0.50x; "
        "constant velocity 0.0010)"]
