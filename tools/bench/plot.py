"""``openhlo bench --png``: a bar chart of every runner's time relative to XLA's."""
from __future__ import annotations


def plot_ratios(report: dict, path: str) -> None:
    """Grouped bars per workload, one per runner, of time / XLA's time (log scale)."""
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    names = [r["name"] for r in report["workloads"]]
    runners = [r for r in report["runners"] if r != "xla"]  # xla is the 1x line
    width = 0.8 / max(len(runners), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(names) + 2), 4.5))
    for i, runner in enumerate(runners):
        xs, ys = [], []
        for j, record in enumerate(report["workloads"]):
            ratio = record["results"].get(runner, {}).get("vs_xla")
            if ratio is not None:
                xs.append(j + (i - (len(runners) - 1) / 2) * width)
                ys.append(ratio)
        # bars grow from 1 (as fast as XLA), up when slower, down when faster
        ax.bar(xs, [y - 1.0 for y in ys], width, bottom=1.0, label=runner)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel("time / XLA time (lower is faster)")
    ax.set_title("openhlo bench: time relative to jax.jit (XLA:CPU)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_zoo(report: dict, path: str) -> None:
    """``openhlo bench --zoo --png``: per model, openhlo's forward (and training step) time
    over Inductor's (log scale); models with fallbacks hatched and marked F, models openhlo
    got wrong or could not run marked X at 1x."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from tools.bench.zoo_report import fallbacks
    records = [r for r in report["models"] if r["status"] != "skipped"]
    modes = [m for m in ("forward", "train") if any(m in r for r in records)]
    width = 0.8 / max(len(modes), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.35 * len(records) + 2), 5))
    for i, mode in enumerate(modes):
        offset = (i - (len(modes) - 1) / 2) * width
        for j, record in enumerate(records):
            ours = record[mode]["backends"]["openhlo"]
            ratio = record[mode]["ratios"].get("vs_inductor")
            x = j + offset
            if ratio is None:
                ax.text(x, 1.0, "X", ha="center", va="center", color="red", fontsize=8)
                continue
            marked = bool(fallbacks(ours))
            ax.bar(x, ratio - 1.0, width, bottom=1.0, color=f"C{i}",
                   hatch="//" if marked else None, edgecolor="black" if marked else None,
                   label=mode if j == 0 else None)
            if marked:
                ax.text(x, max(ratio, 1.0) * 1.05, "F", ha="center", fontsize=7, color="red")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(2.0, color="grey", linewidth=0.6, linestyle="--")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(records)), [r["name"] for r in records], rotation=60, ha="right",
                  fontsize=7)
    ax.set_ylabel("openhlo time / Inductor time (lower is faster)")
    ax.set_title("openhlo bench --zoo: time relative to TorchInductor "
                 "(F: fallbacks, X: wrong or failed)")
    if modes:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
