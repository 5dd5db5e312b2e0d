"""The success classifier on a run's frozen encoder: precision and recall on held-out episodes.

    .venv/bin/python bench/success_classifier.py /tmp/vision_bc_run
    .venv/bin/python bench/success_classifier.py RUN --groups demo,real --save RUN/vision/success

1. The encoder: `--encoder DIR`, else RUN/vision/encoder (the loop's), else RUN/policies/<latest> (a
   published vision policy's encoder). It is used frozen, as the loop uses it.
2. Every committed episode of `--groups` (default: demo, real, sim where present) is encoded; the
   target is the store's per-step `success` column with operator labels applied
   (worldsample.vision.success).
3. Cross-validation by episode (`--folds`): each fold is the test set once, the next fold sets the
   threshold, the others train; the test frames of all folds are scored together. Printed: precision,
   recall, F1, the frames predicted, and `near_misses` (false positives at most 3 steps before a
   success step). Then one train / calibration / test split, the classifier `--save`d from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def find_encoder(run: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    if (run / "vision" / "encoder" / "encoder.json").exists():
        return run / "vision" / "encoder"
    latest = run / "policies" / "latest"
    if latest.is_file():
        d = run / "policies" / latest.read_text().strip()
        if (d / "encoder.json").exists():
            return d
    raise SystemExit(f"no encoder in {run}/vision/encoder or {run}/policies/latest: pass --encoder DIR")


def fmt(s: dict) -> str:
    def f(v):
        return "n/a" if v is None else f"{v:.3f}"

    return (f"precision {f(s['precision'])}  recall {f(s['recall'])}  f1 {f(s['f1'])}  "
            f"({s['positives']} success frames of {s['frames']}; {s['predicted']} predicted, "
            f"{s.get('near_misses', 0)} of them within 3 steps before a success)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--encoder", default=None)
    ap.add_argument("--groups", default=None, help="comma-separated (default: demo, real, sim where present)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--hidden", default="64", help="MLP widths, comma-separated ('' = logistic regression)")
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--no-proprio", action="store_true")
    ap.add_argument("--min-precision", type=float, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--save", default=None, help="write the single-split classifier here")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()

    from worldsample.vision import load_encoder
    from worldsample.vision.success import (
        SuccessTrainConfig,
        cross_validate,
        load_success_data,
        save_success_classifier,
        train_success_classifier,
    )

    t0 = time.perf_counter()
    enc_dir = find_encoder(args.run, args.encoder)
    enc = load_encoder(enc_dir)
    groups = args.groups.split(",") if args.groups else None
    data = load_success_data(args.run, enc, groups)
    t_load = time.perf_counter() - t0
    pos = int(data.target.sum())
    print(f"encoder {enc_dir} ({enc.config.cameras}, latent {enc.config.latent_dim}); groups {data.groups}: "
          f"{len(data.episodes)} episodes, {len(data)} frames, {pos} success frames ({pos / len(data):.1%}), "
          f"{data.labelled} labelled by an operator, {data.skipped} unreadable; loaded+encoded in {t_load:.1f} s")
    cfg = SuccessTrainConfig(hidden=[int(h) for h in args.hidden.split(",") if h], steps=args.steps,
                             use_proprio=not args.no_proprio, min_precision=args.min_precision, threads=args.threads)
    t1 = time.perf_counter()
    cv = cross_validate(data, enc, cfg, folds=args.folds)
    t_cv = time.perf_counter() - t1
    print(f"cross-validation, {args.folds} folds (every episode held out once), {t_cv:.1f} s:\n  {fmt(cv)}\n"
          f"  thresholds {[round(t, 3) for t in cv['thresholds']]}")
    res = train_success_classifier(data, enc, cfg)
    print(f"one split (train {len(res.splits['train'])} / calibration {len(res.splits['calibration'])} / "
          f"test {len(res.splits['test'])} episodes), threshold {res.classifier.threshold:.3f}, {res.seconds:.1f} s:\n"
          f"  calibration: {fmt(res.calibration)}\n  test:        {fmt(res.test)}")
    if args.save:
        save_success_classifier(res.classifier, args.save)
        print(f"saved to {args.save}")
    out = {"run": str(args.run), "encoder": str(enc_dir), "groups": data.groups, "episodes": len(data.episodes),
           "frames": len(data), "positives": pos, "config": cfg.model_dump(), "cross_validation": cv,
           "split": {"threshold": res.classifier.threshold, "calibration": res.calibration, "test": res.test},
           "seconds": {"load": t_load, "cross_validation": t_cv, "total": time.perf_counter() - t0}}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
