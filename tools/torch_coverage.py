"""Print how OpenHLO covers the core ATen opset (lowered / decomposed / fallback).

    python -m tools.torch_coverage [--markdown]
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)
    from frameworks.torch.coverage import classify
    table = classify()
    if args.markdown:
        print("| core ATen op | status |\n|---|---|")
    for name, status in table.items():
        print(f"| `{name}` | {status} |" if args.markdown else f"{status:10s} {name}")
    counts = {s: sum(1 for v in table.values() if v == s)
              for s in ("lowered", "decomposed", "fallback")}
    covered = counts["lowered"] + counts["decomposed"]
    print(f"\n{len(table)} core ATen ops: {counts['lowered']} lowered, {counts['decomposed']} "
          f"decomposed, {counts['fallback']} fallback; {100.0 * covered / len(table):.1f}% "
          f"do not fall back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
