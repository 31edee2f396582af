"""Charts as inline SVG, drawn with matplotlib: the lineage diagram of a partition and the
run's timeline. No pyplot (no global figure state), text kept as SVG text (so the browser
can find it, and matplotlib escapes it), ids salted for byte-stable output.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
from markupsafe import Markup
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "logfork",
    "font.size": 9,
    # The one family matplotlib ships with, so that it is always there to measure text
    # with: asking for any other makes matplotlib warn on every label where it is missing.
    "font.family": ["DejaVu Sans"],
    "axes.spines.top": False,
    "axes.spines.right": False,
}
EPOCH_COLOURS = [
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#edc948",
    "#76b7b2",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#86bcb6",
]
LEGACY_COLOUR = "#c7c7c7"  # v0/v1 batches carry no leader epoch
DIVERGED_FILL = "#fde2e1"
DIFFERS_EDGE = "#b3261e"
WRITE_COLOUR = "#7b2cbf"
KIND_STYLE = {
    "fault": ("v", "#c62828", 0.85),
    "heal": ("^", "#2e7d32", 0.6),
    "election": ("D", "#1565c0", 0.35),
}
PHASE_FILLS = ["#f5f5f5", "#ffffff"]


def _svg(fig: Figure, label: str) -> Markup:
    buf = io.StringIO()
    FigureCanvasSVG(fig)
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    # Scale with the page: keep the viewBox, drop the fixed size.
    text = re.sub(
        r'<svg([^>]*?) width="[^"]*" height="[^"]*"',
        rf'<svg\1 class="chart" role="img" aria-label="{_attr(label)}"',
        text,
        count=1,
    )
    return Markup(text)


def _attr(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def _text(ax: Any, x: float, y: float, s: str, **kw: Any) -> Any:
    # parse_math=False: a '$' in a topic, key or error text stays a '$'.
    return ax.text(x, y, s, parse_math=False, **kw)


def epoch_colour(epoch: int | None) -> str:
    """One colour per leader epoch number, the same in every chart of every report."""
    if epoch is None or epoch < 0:
        return LEGACY_COLOUR
    return EPOCH_COLOURS[epoch % len(EPOCH_COLOURS)]


def epoch_colours(epochs: Sequence[int]) -> dict[int, str]:
    colours = {e: epoch_colour(e) for e in set(epochs)}
    colours[-1] = LEGACY_COLOUR
    return colours


# --------------------------------------------------------------------------------------
# Lineage diagram


def lineage_svg(diagram: dict[str, Any], title: str, leader: int | None = None) -> Markup:
    """Replicas as rows along the offset axis; batches coloured by leader epoch; the high
    watermark and each log end offset marked; the divergent range shaded."""
    rows = diagram["rows"]
    low, high = diagram["low"], max(diagram["high"], diagram["low"] + 1)
    diverged = diagram.get("diverged")
    epochs = [s[2] for r in rows for s in r["segments"]]
    colours = epoch_colours(epochs)
    zoom = None
    if diverged is not None and high - low > 200:
        pad = max(5, (diverged[1] - diverged[0] + 1))
        zoom = (max(low, diverged[0] - pad), min(high, diverged[1] + 1 + pad))
    panels = [(low, high)] + ([zoom] if zoom else [])
    height = 0.9 + 0.55 * len(rows)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(11, height * len(panels) + 0.5))
        axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
        for ax, (x0, x1) in zip(axes, panels, strict=True):
            _draw_lineage(ax, rows, colours, diagram, x0, x1, leader)
        axes[0].set_title(title, loc="left", fontsize=10, fontweight="bold")
        if zoom:
            axes[1].set_title(
                f"offsets {zoom[0]} to {zoom[1] - 1}, around the divergence",
                loc="left",
                fontsize=9,
            )
        handles = [
            Patch(facecolor=colours[e], edgecolor="black", label=f"epoch {e}")
            for e in sorted(c for c in colours if c >= 0)
        ]
        if any(s[2] < 0 for r in rows for s in r["segments"]):
            handles.append(Patch(facecolor=LEGACY_COLOUR, label="no epoch (v0/v1)"))
        handles.append(
            Patch(
                facecolor="white", edgecolor=DIFFERS_EDGE, hatch="////", label="differs from leader"
            )
        )
        if diverged is not None:
            handles.append(Patch(facecolor=DIVERGED_FILL, label="divergent range"))
        fig.legend(
            handles=handles,
            loc="lower center",
            ncol=min(len(handles), 7),
            frameon=False,
            fontsize=8,
            bbox_to_anchor=(0.5, -0.02),
        )
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        return _svg(fig, f"lineage of {title}")


def _draw_lineage(
    ax: Any,
    rows: Sequence[dict[str, Any]],
    colours: dict[int, str],
    diagram: dict[str, Any],
    x0: int,
    x1: int,
    leader: int | None,
) -> None:
    n = len(rows)
    span = max(1, x1 - x0)
    diverged = diagram.get("diverged")
    if diverged is not None:
        ax.axvspan(diverged[0], diverged[1] + 1, color=DIVERGED_FILL, zorder=0, lw=0)
        _text(
            ax,
            diverged[0],
            n - 0.35,
            f" replicas differ from offset {diverged[0]}",
            color=DIFFERS_EDGE,
            fontsize=8,
            va="bottom",
            clip_on=True,
        )
    labels = []
    for i, row in enumerate(rows):
        y = n - 1 - i
        who = f"broker {row['broker']}"
        if row["broker"] == leader:
            who += " · leader"
        elif row["reference"]:
            who += " · reference"
        labels.append(who)
        for base, last, epoch, mark, count in row["segments"]:
            if last + 1 < x0 or base > x1:
                continue
            width = last - base + 1
            rect = Rectangle(
                (base, y - 0.3),
                width,
                0.6,
                facecolor=colours.get(epoch, LEGACY_COLOUR),
                edgecolor=DIFFERS_EDGE if mark == "differs" else "#222222",
                linewidth=1.6 if mark == "differs" else 0.5,
                hatch="////" if mark == "differs" else ("xx" if mark == "bad-crc" else None),
                linestyle=":" if mark == "unmatched" else "-",
                zorder=2,
            )
            ax.add_patch(rect)
            visible = min(last + 1, x1) - max(base, x0)
            share = visible / span
            label = None
            if share > 0.09:
                label = f"[{base}, {last}] e{epoch}" if count == 1 else f"{count} batches e{epoch}"
            elif share > 0.03:
                label = f"e{epoch}"
            if label:
                _text(
                    ax,
                    max(base, x0) + visible / 2,
                    y,
                    label,
                    ha="center",
                    va="center",
                    fontsize=7.5,
                    zorder=3,
                    color="black",
                    bbox={"facecolor": "white", "alpha": 0.7, "lw": 0, "pad": 0.6},
                )
        leo = row["leo"]
        if x0 <= leo <= x1:
            ax.plot([leo, leo], [y - 0.38, y + 0.38], color="black", lw=2, zorder=4)
            _text(ax, leo + span * 0.006, y, f"LEO {leo}", fontsize=7.5, va="center")
        hw = row.get("high_watermark")
        if hw is not None and x0 <= hw <= x1:
            ax.plot([hw], [y - 0.4], marker="^", color="#333333", ms=5, zorder=4)
            if hw != diagram.get("high_watermark"):
                _text(ax, hw + span * 0.004, y - 0.42, f"HW {hw}", fontsize=7, va="top")
    hw = diagram.get("high_watermark")
    if hw is not None and x0 <= hw <= x1:
        ax.axvline(hw, color="#333333", ls="--", lw=1, zorder=1)
        _text(
            ax,
            hw - span * 0.004,
            n - 0.35,
            f"high watermark {hw}",
            fontsize=7.5,
            ha="right",
            va="bottom",
        )
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(labels)))
    ax.set_ylim(-0.9, n - 0.1)
    pad = max(1, span * 0.03)
    ax.set_xlim(x0 - pad, x1 + pad * 2.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=12))
    ax.set_xlabel("offset")
    ax.spines["left"].set_visible(False)
    ax.tick_params(axis="y", length=0)


# --------------------------------------------------------------------------------------
# Timeline


def timeline_svg(view: dict[str, Any]) -> Markup | None:
    """Faults, heals and elections over the run's phases; the focus partition's leader,
    epoch, ISR and recovery state; acknowledged and failed sends per second; and the moments
    the divergent versions were written."""
    start = view.get("start")
    run = view.get("events") or []
    if start is None or not run:
        return None
    events = [e for e in run if isinstance(e.get("wall"), int | float)]
    states = [
        s
        for s in view.get("states") or []
        if isinstance(s.get("wall"), int | float)
        and view.get("focus") is not None
        and (s.get("topic"), s.get("partition") or 0) == tuple(view["focus"])
    ]
    acks = view.get("acks_per_second") or []
    writes = [
        version
        for v in view.get("diverged") or []
        if v.get("attribution")
        for version in v["attribution"]["versions"]
        if not version.get("reference") and version.get("at") is not None
    ]
    times = [e["wall"] - start for e in events] + [s["wall"] - start for s in states]
    if not times:
        return None
    t_end = max(times) + 0.5
    panels = ["events"] + (["state"] if states else []) + (["acks"] if acks else [])
    ratios = {"events": 1.5, "state": 1.3, "acks": 0.8}
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(11, 0.6 + sum(ratios[p] for p in panels)))
        axes = fig.subplots(
            len(panels),
            1,
            sharex=True,
            squeeze=False,
            gridspec_kw={"height_ratios": [ratios[p] for p in panels]},
        )[:, 0]
        by_name = dict(zip(panels, axes, strict=True))
        _phases(axes, events, start, t_end, max(t_end, 1.0))
        _events(by_name["events"], view.get("marks") or [], start, t_end)
        if "state" in by_name:
            _states(by_name["state"], states, start, t_end, view["focus"])
        if "acks" in by_name:
            _acks(by_name["acks"], acks, start)
        for version in writes:
            x = version["at"] - start
            for ax in axes:
                ax.axvline(x, color=WRITE_COLOUR, ls="--", lw=1.2, zorder=1)
            _text(
                axes[0],
                x,
                1.12,
                f"{version['span']} e{version['leader_epoch']} written",
                color=WRITE_COLOUR,
                fontsize=7.5,
                ha="center",
                va="bottom",
            )
        axes[-1].set_xlabel("seconds since the run started")
        axes[-1].set_xlim(min(0.0, min(times)) - 0.2, t_end)
        fig.tight_layout()
        return _svg(fig, "run timeline")


def _phases(
    axes: Sequence[Any], events: Sequence[dict], start: float, t_end: float, span: float
) -> None:
    marks = sorted((e for e in events if e.get("kind") == "phase"), key=lambda e: e["wall"])
    for i, mark in enumerate(marks):
        x0 = mark["wall"] - start
        x1 = marks[i + 1]["wall"] - start if i + 1 < len(marks) else t_end
        for ax in axes:
            ax.axvspan(x0, x1, color=PHASE_FILLS[i % 2], zorder=0, lw=0)
            ax.axvline(x0, color="#bbbbbb", lw=0.6, zorder=0)
        if x1 - x0 >= span * 0.06:  # a phase too short to name keeps its band
            _text(
                axes[0], x0, 1.32, str(mark.get("name")), fontsize=7.5, color="#555555", va="bottom"
            )


def _short(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _events(ax: Any, marks: Sequence[dict], start: float, span: float) -> None:
    """Numbered markers (the numbers of the timeline table). A label is written out above
    its marker when there is room before the next one on its line; else the number alone
    goes below the marker, clear of the label it would cover."""
    above: dict[float, float] = {}
    below: dict[float, float] = {}
    for m in marks:
        marker, colour, y = KIND_STYLE[m["kind"]]
        x = m["wall"] - start
        ax.plot([x], [y], marker=marker, color=colour, ms=7, zorder=3, ls="none")
        # Roughly the width of a 7 pt character in data units on an 11 in axis.
        char = span * 0.0085
        label = f"{m['n']} {_short(m['short'], 24)}"
        if x >= above.get(y, -1e9):
            text, ty, va, ends = label, y + 0.06, "bottom", above
        elif x >= below.get(y, -1e9):
            text, ty, va, ends = str(m["n"]), y - 0.07, "top", below
        else:
            continue  # the table still lists it, with its number
        _text(ax, x + span * 0.004, ty, text, fontsize=7, color=colour, ha="left", va=va, zorder=4)
        ends[y] = x + char * (len(text) + 1)
    ax.set_ylim(0.1, 1.3)
    ax.set_yticks([KIND_STYLE[k][2] for k in ("fault", "heal", "election")])
    ax.set_yticklabels(["faults", "heals", "elections"])
    ax.tick_params(axis="y", length=0)


def _states(
    ax: Any, states: Sequence[dict], start: float, t_end: float, focus: Sequence[Any]
) -> None:
    states = sorted(states, key=lambda s: s["wall"])
    brokers = sorted(
        {b for s in states for b in (s.get("isr") or [])}
        | {s["leader"] for s in states if isinstance(s.get("leader"), int) and s["leader"] >= 0}
    )
    row = {b: i + 1 for i, b in enumerate(brokers)}
    for i, s in enumerate(states):
        x0 = s["wall"] - start
        x1 = states[i + 1]["wall"] - start if i + 1 < len(states) else t_end
        for b in s.get("isr") or []:
            ax.add_patch(
                Rectangle(
                    (x0, row[b] - 0.18),
                    x1 - x0,
                    0.36,
                    facecolor="#dcdcdc",
                    edgecolor="none",
                    zorder=1,
                )
            )
        leader = s.get("leader")
        epoch = s.get("leader_epoch")
        recovering = s.get("recovery_state") == "RECOVERING"
        if isinstance(leader, int) and leader in row:
            ax.add_patch(
                Rectangle(
                    (x0, row[leader] - 0.3),
                    x1 - x0,
                    0.6,
                    facecolor=epoch_colour(epoch),
                    edgecolor="black",
                    lw=0.5,
                    hatch="..." if recovering else None,
                    zorder=2,
                )
            )
            _text(
                ax,
                x0 + 0.05,
                row[leader],
                f"e{epoch}" + (" recovering" if recovering else ""),
                fontsize=7,
                va="center",
                zorder=3,
            )
        else:
            ax.add_patch(
                Rectangle((x0, -0.3), x1 - x0, 0.6, facecolor="#f4b6b6", edgecolor="none", zorder=2)
            )
    ax.set_yticks([0, *row.values()])
    ax.set_yticklabels(["no leader", *[f"broker {b}" for b in row]])
    ax.set_ylim(-0.6, len(row) + 0.6)
    ax.tick_params(axis="y", length=0)
    _text(
        ax,
        0.0,
        1.0,
        f" {focus[0]}-{focus[1]}: leader (coloured by epoch), ISR (grey)",
        transform=ax.transAxes,
        fontsize=7.5,
        va="bottom",
        color="#444444",
    )


def _acks(ax: Any, acks: Sequence[dict], start: float) -> None:
    xs = [a["second"] - start for a in acks]
    ok = [a["acked"] for a in acks]
    failed = [a["failed"] for a in acks]
    ax.bar(xs, ok, width=0.9, align="edge", color="#59a14f", label="acknowledged")
    ax.bar(xs, failed, bottom=ok, width=0.9, align="edge", color="#e15759", label="failed")
    ax.set_ylabel("sends/s", fontsize=8)
    ax.legend(loc="upper right", fontsize=7, frameon=False)
