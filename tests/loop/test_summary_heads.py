"""The run summary reports the world model's success and done heads (issue 17, item 3): precision and
recall on the held-out windows in the printed summary and in metrics.jsonl, '-' / left out where a
score is undefined (nothing predicted, or no positive in the held-out windows)."""

from services.cli.train_cmd import head_scores
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
