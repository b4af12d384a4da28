# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---
# ruff: noqa: B018, E402  (notebook cells: a cell's last expression is what Jupyter shows; imports where used)

# %% [markdown]
# # ranksight quickstart
#
# Where the time goes in a multi-GPU PyTorch job, from a notebook. This file is a
# [jupytext](https://jupytext.readthedocs.io) "percent" script: open it in Jupyter (with jupytext
# installed) as a notebook, or run it as a plain script (`python examples/quickstart.py`); a test
# runs it that way. The traces are the built-in example: 8 ranks of one DLRM training step.

# %%
import ranksight
from ranksight.data import example_path

run = ranksight.load(example_path("dlrm"))  # a folder of rank files, files, globs, or {rank: path}
run.ranks

# %% [markdown]
# ## One analysis
#
# `ranksight.analyze(run, NAME, **options)` runs one analysis (`ranksight analyze --help` lists
# them, `docs/<name>.md` defines their columns). The result holds polars DataFrames; in a notebook
# it shows itself as small HTML tables.

# %%
temporal = ranksight.analyze(run, "temporal", per_step=True)
temporal

# %%
temporal.main  # the main table, a polars DataFrame (temporal["per_step"] for another)

# %%
temporal.main.select("rank", "idle_pct").sort("idle_pct", descending=True).head(3)

# %% [markdown]
# `.plot()` draws the main table (or `table=`) as a bar chart per rank when plotly is installed
# (`pip install plotly`); without plotly it says so in one line.

# %%
try:
    fig = temporal.plot(y=["compute_us", "non_compute_us", "idle_us"])
    fig  # shown by Jupyter
except ranksight.RanksightError as err:
    print(err)

# %% [markdown]
# ## Findings
#
# `ranksight.diagnose(run)` runs every rule: one row per finding, worst first, with the fix to try.

# %%
findings = ranksight.diagnose(run)
findings.main.select("severity", "rule", "ranks", "summary")

# %% [markdown]
# ## The report
#
# `ranksight.report(run, path)` writes the self-contained HTML report (no network request; open
# it in a browser) and returns its path. Analyses already computed on a `Session` are reused.

# %%
import tempfile
from pathlib import Path

from ranksight.analyses import Session

session = Session(run)  # every analysis computed once, shared by what follows
ranksight.analyze(session, "temporal")
out = ranksight.report(session, Path(tempfile.mkdtemp()) / "dlrm.report.html")
print(f"report: {out} ({out.stat().st_size / 1e6:.2f} MB); open it in a browser")

# %% [markdown]
# Run as a script, this prints what a notebook shows under the cells above:

# %%
if __name__ == "__main__":
    print(temporal.main)
    print(findings.main.select("severity", "rule", "ranks"))
