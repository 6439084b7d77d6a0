#!/usr/bin/env python3
"""Training curves of the demos: plot the per-step CSV histories that
`attn-train --history F.csv` and `examples/train/train.py --history F.csv` write.

    .venv/bin/python examples/plot_curves.py cpp=build/artifacts/cpp.csv \
        python=build/artifacts/python.csv -o build/artifacts/curves.png
"""
import argparse
from pathlib import Path

from attn import plotting


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("histories", nargs="+", help="LABEL=FILE.csv (or FILE.csv)")
    p.add_argument("-o", "--output", required=True, help="PNG to write")
    p.add_argument("--smooth", type=int, default=20, help="moving-average window (steps)")
    p.add_argument("--title")
    args = p.parse_args(argv)
    histories = {}
    for item in args.histories:
        label, _, path = item.rpartition("=")
        histories[label or Path(path).stem] = plotting.read_history_csv(path)
    plotting.training_curves(histories, args.output, smooth=args.smooth, title=args.title)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
