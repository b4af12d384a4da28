"""The "Comparison with the baseline" section: ``ranksight report --baseline BASE TEST``.

The report is built for the TEST run; the baseline run is a parameter of the report
(``build_payload(..., baseline=(BASE, labels))``, :attr:`Ctx.baseline`). Without a
baseline the section is listed under "Not shown" with the command that adds it. The blocks come
from :func:`ranksight.report.diff.diff_sections` (the same tables as ``ranksight diff``), plus a
stacked bar of the step breakdown of both runs.
"""

from __future__ import annotations

from typing import Any

from ranksight.report.html.sections import Ctx, Skip, section

__all__ = ["MAX_ROWS"]

#: Rows of the long tables put in the report (sorted by |delta|; the CLI's CSV has all).
MAX_ROWS = 500


def _breakdown_bar(ctx: Ctx, res: Any, labels: tuple[str, str]) -> dict[str, Any] | None:
    """Mean step of each run split into the breakdown categories (they sum to the mean step)."""
    from ranksight.analyses.diff import CATEGORIES

    cats = [c for c in CATEGORIES if c in res.samples]
    if not cats:
        return None
    bars = {c: [float(res.samples[c][0].mean()) / 1e6, float(res.samples[c][1].mean()) / 1e6] for c in cats}
    return ctx.bar(
        list(labels),
        bars,
        id="diff-breakdown",
        title="Mean step breakdown (ms)",
        stacked=True,
        horizontal=True,
        unit="ms",
    )


@section(
    "diff",
    "Comparison with the baseline",
    group="Findings",
    order=90,
    help="Per-step comparison with a baseline run (ranksight report --baseline BASE TEST): step time and "
    "breakdown, top contributors, operators, kernels and collectives, with Welch's t-test over steps.",
)
def comparison(ctx: Ctx) -> list[dict[str, Any]]:
    from ranksight.analyses.diff import diff
    from ranksight.report.diff import diff_sections

    given = ctx.baseline
    if given is None:
        raise Skip("no baseline given: `ranksight report --baseline BASE TEST` adds this comparison")
    base, labels = given
    res = diff(base, ctx.run, labels=labels, captures=(None, ctx.session.default("capture")))
    blocks: list[dict[str, Any]] = []
    for sec in diff_sections(res, rows=None):
        if sec["id"] == "diff-method":
            ctx.notes.extend(res.notes)
            continue
        if sec["text"]:
            blocks.append(ctx.text(sec["text"], id=f"{sec['id']}-text"))
        if sec["id"] == "diff-summary":
            bar = _breakdown_bar(ctx, res, labels)
            if bar is not None:
                blocks.append(bar)
        df = sec["table"]
        if df is not None and df.height:
            blocks.append(ctx.table(df.head(MAX_ROWS), id=sec["id"], title=sec["title"]))
    return blocks
