"""Plots researchers ask for: attention maps and training curves (matplotlib, PNG).

    attn.plotting.attention_map(weights, "map.png", row_labels=..., col_labels=...)
    attn.plotting.training_curves({"softmax": hist_a, "tanhmax": hist_b}, "curves.png")

Attention maps use a diverging colour map centred on 0 (red positive, blue negative,
white 0) with a symmetric range, so that the signed weights of normalizers such as
TanhMax read as in the TanhMax paper's Figure 1; softmax maps come out all red.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

__all__ = ["attention_map", "draw_attention_map", "training_curves", "read_history_csv",
           "moving_average"]

DIVERGING = "RdBu_r"   # blue (negative) - white (0) - red (positive)


def draw_attention_map(ax, weights, row_labels=None, col_labels=None, title=None, limit=None,
                       annotate=False):
    """Draws a [rows, cols] weight matrix on `ax`; returns the image (for a colorbar).
    `limit` fixes the symmetric colour range ±limit (default: max |w|)."""
    w = torch.as_tensor(weights).detach().double().cpu()
    if w.dim() == 1:
        w = w.unsqueeze(0)
    limit = float(limit if limit is not None else max(w.abs().max().item(), 1e-12))
    image = ax.imshow(w.numpy(), cmap=DIVERGING, vmin=-limit, vmax=limit, aspect="auto",
                      interpolation="nearest")
    if col_labels is not None:
        ax.set_xticks(range(len(col_labels)))
        ax.set_xticklabels(col_labels, rotation=90, fontsize=7)
    if row_labels is not None:
        ax.set_yticks(range(len(row_labels)))
        ax.set_yticklabels(row_labels, fontsize=7)
    if annotate:
        for (i, j), value in zip(((i, j) for i in range(w.shape[0]) for j in range(w.shape[1])),
                                 w.flatten().tolist()):
            ax.text(j, i, f"{value:+.2f}", ha="center", va="center", fontsize=5)
    if title:
        ax.set_title(title, fontsize=9)
    return image


def attention_map(weights, path, row_labels=None, col_labels=None, title=None):
    """Writes one attention map ([rows, cols], or [B, H, rows, cols] of which [0, 0])
    to a PNG with a colour bar."""
    w = torch.as_tensor(weights)
    while w.dim() > 2:
        w = w[0]
    fig, ax = plt.subplots(figsize=(max(4, 0.3 * w.shape[-1] + 2), max(3, 0.3 * w.shape[0] + 1.5)))
    image = draw_attention_map(ax, w, row_labels, col_labels, title)
    fig.colorbar(image, ax=ax, label="attention weight")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def read_history_csv(path):
    """A CSV with a header (step,loss,acc,... as written by the demos) -> dict of columns."""
    with open(path) as f:
        names = f.readline().strip().split(",")
        rows = [list(map(float, line.split(","))) for line in f if line.strip()]
    return {name: [row[i] for row in rows] for i, name in enumerate(names)}


def moving_average(values, window):
    """Means over `window` consecutive values (the window shrinks to fit short series):
    len(values) - window + 1 of them, the first covering values[0:window]."""
    values = torch.as_tensor(values, dtype=torch.float64)
    window = max(1, min(window, len(values)))
    kernel = torch.ones(1, 1, window, dtype=torch.float64) / window
    return torch.nn.functional.conv1d(values.view(1, 1, -1), kernel).flatten().tolist()


def training_curves(histories, path, metrics=("loss", "acc"), smooth=20, title=None):
    """histories: {label: dict of columns (read_history_csv) or a list of {"step": .., metric: ..}
    rows}. One panel per metric; curves are moving averages over `smooth` steps."""
    def columns(h):
        if isinstance(h, dict):
            return h
        return {k: [row[k] for row in h] for k in h[0]}

    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5), squeeze=False)
    for label, history in histories.items():
        cols = columns(history)
        steps = cols["step"]
        for ax, metric in zip(axes[0], metrics):
            smoothed = moving_average(cols[metric], smooth)
            ax.plot(steps[len(steps) - len(smoothed):], smoothed, label=label)
            ax.set_xlabel("step")
            ax.set_ylabel(metric)
    for ax in axes[0]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
