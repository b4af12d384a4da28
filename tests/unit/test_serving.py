"""``analyze serving`` on hand-built traces: every step annotation form (one test each, unknown forms
reported), per-step timing with exact values, nested annotations of one step, summaries, the step-time fit."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.unit.test_graphs import Tr

import ranksight
from ranksight.analyses import Session
from ranksight.analyses.serving import fit_step_time
from ranksight.errors import MissingDataError
from ranksight.views.serving_steps import parse_step_name, serving_steps, unknown_step_names

# ---- the forms -------------------------------------------------------------------------------------


def test_vllm_stats_decode() -> None:
    p = parse_step_name("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)")
    assert p == {
        "form": "vllm-stats",
        "phase": "decode",
        "mode": None,
        "batch_size": 32,
        "prefill_tokens": 0,
        "decode_tokens": 32,
        "kv_tokens": 55086,
        "continued": False,
    }


def test_vllm_stats_mixed_with_continued_prefill() -> None:
    p = parse_step_name(
        "execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)"
    )
    assert p is not None
    assert (p["phase"], p["batch_size"], p["prefill_tokens"], p["decode_tokens"], p["kv_tokens"], p["continued"]) == (
        "mixed",
        46,
        8155,
        37,
        8430 + 34489,
        True,
    )


def test_vllm_stats_prefill_and_chunked_prefill() -> None:
    new = parse_step_name(
        "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0(sq0sk0sqsq0sqsk0)"
    )
    assert new is not None and new["phase"] == "prefill" and new["continued"] is False
    cont = parse_step_name("execute_512_context_1(sq512sk1536sqsq262144sqsk786432)_generation_0(sq0sk0sqsq0sqsk0)")
    assert cont is not None and cont["phase"] == "chunked prefill" and cont["kv_tokens"] == 1536


def test_vllm_stats_whose_sums_disagree_is_unknown() -> None:
    assert parse_step_name("execute_99_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk100sqsq32sqsk100)") is None


def test_vllm_step_range() -> None:
    p = parse_step_name("execute_context_1(128)_generation_0(0)")
    assert p is not None
    assert (p["form"], p["phase"], p["batch_size"], p["prefill_tokens"], p["decode_tokens"], p["kv_tokens"]) == (
        "vllm",
        "prefill",
        1,
        128,
        0,
        None,
    )
    d = parse_step_name("execute_context_0(0)_generation_64(64)")
    assert d is not None and (d["phase"], d["batch_size"], d["decode_tokens"]) == ("decode", 64, 64)


def test_vllm_step_range_with_second_number() -> None:
    """tracelens/b200: `execute_context_1(888_788544)_generation_0(0)` (788544 = 888²: kept uninterpreted)."""
    p = parse_step_name("execute_context_1(888_788544)_generation_0(0)")
    assert p is not None and (p["phase"], p["prefill_tokens"], p["kv_tokens"]) == ("prefill", 888, None)


def test_sglang_decode() -> None:
    p = parse_step_name("step[DECODE bs=32]")
    assert p is not None
    assert (p["form"], p["phase"], p["mode"], p["batch_size"], p["prefill_tokens"], p["decode_tokens"]) == (
        "sglang",
        "decode",
        "DECODE",
        32,
        0,
        32,
    )


def test_sglang_extend() -> None:
    p = parse_step_name("step[EXTEND bs=15 toks=15360]")
    assert p is not None and (p["phase"], p["batch_size"], p["prefill_tokens"], p["decode_tokens"]) == (
        "prefill",
        15,
        15360,
        0,
    )


def test_sglang_mixed_and_other_modes() -> None:
    m = parse_step_name("step[MIXED bs=4 toks=100]")
    assert m is not None and (m["phase"], m["prefill_tokens"], m["decode_tokens"]) == ("mixed", None, None)
    idle = parse_step_name("step[IDLE bs=0]")
    assert idle is not None and idle["phase"] is None and idle["mode"] == "IDLE"


@pytest.mark.parametrize(
    "name",
    [
        "execute_diffusion_1_256x256",  # xDiT (tracelens/inference/xdit_flux.1)
        "step[DECODE]",
        "execute_context_1(1_2_3)_generation_0(0)",
        "execute_32_context_0(sq0sk0)_generation_32(sq32sk1)",
    ],
)
def test_unknown_forms(name: str) -> None:
    assert parse_step_name(name) is None


# ---- steps from a trace ----------------------------------------------------------------------------


def _decode_server(tmp: Path, n: int = 4) -> Path:
    """``n`` SGLang decode steps of 100 µs CPU, every 150 µs; each launches one 40 µs kernel 20 µs in."""
    tr = Tr()
    for i in range(n):
        t = 1000 + 150 * i
        tr.ann(f"step[DECODE bs={8 * (i + 1)}]", t, 100)
        e = tr.op("aten::mm", t + 5, 10)
        c = tr.rt("hipLaunchKernel", t + 6, 2, ext=e)
        tr.k("gemm", t + 20, 40, c)
    tr.ann("execute_diffusion_1_256x256", 5000, 10)
    return tr.write(tmp / "server.json")


def test_step_timing_exact(tmp_path: Path) -> None:
    run = ranksight.load(str(_decode_server(tmp_path)), cache=False)
    res = Session.of(run).result("serving")
    s = res["steps"]
    assert s.height == 4
    assert s["batch_size"].to_list() == [8, 16, 24, 32]
    assert s["decode_tokens"].to_list() == [8, 16, 24, 32]
    r0 = s.row(0, named=True)
    assert r0["cpu_ms"] == pytest.approx(0.1)
    assert r0["gpu_ms"] == pytest.approx(0.04) and r0["gpu_busy_ms"] == pytest.approx(0.04)
    assert r0["step_ms"] == pytest.approx(0.1)
    assert r0["gpu_busy_pct"] == pytest.approx(40)
    assert r0["host_gap_ms"] == pytest.approx(0.05)  # CPU end 1100, next start 1150
    assert r0["gpu_idle_between_ms"] == pytest.approx(0.11)  # GPU end 1060, next GPU start 1170
    assert r0["period_ms"] == pytest.approx(0.15)
    assert r0["tokens_per_s"] == pytest.approx(8 / 150e-6)
    assert r0["tpot_ms"] == pytest.approx(0.15)
    last = s.row(3, named=True)
    assert last["period_ms"] is None and last["host_gap_ms"] is None
    assert last["tpot_ms"] == pytest.approx(0.1)  # the last step: its own time
    u = res["unknown"]
    assert u.select("name", "count").rows() == [("execute_diffusion_1_256x256", 1)]
    bp = res["by_phase"].row(0, named=True)
    assert (bp["phase"], bp["steps"], bp["tokens"]) == ("decode", 4, 80)
    assert bp["tokens_per_s"] == pytest.approx(80 / ((150 * 3 + 100) * 1e-6))
    assert res["by_batch"].height == 4
    assert any("not parsed, not guessed" in n for n in res.notes)


def test_nested_annotations_are_one_step(tmp_path: Path) -> None:
    tr = Tr()
    tr.ann("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk500sqsq32sqsk500)", 0, 100)
    tr.ann("step[DECODE bs=32]", 1, 98)
    run = ranksight.load(str(tr.write(tmp_path / "t.json")), cache=False)
    s = serving_steps(run[0])
    assert s.height == 1
    assert (s["form"][0], s["mode"][0], s["kv_tokens"][0], s["cpu_start_ns"][0]) == ("vllm-stats", "DECODE", 500, 0)


def test_no_steps_is_missing_data_naming_unknown_forms(tmp_path: Path) -> None:
    tr = Tr()
    tr.ann("execute_diffusion_1_256x256", 0, 10)
    run = ranksight.load(str(tr.write(tmp_path / "t.json")), cache=False)
    assert unknown_step_names(run[0])["name"].to_list() == ["execute_diffusion_1_256x256"]
    with pytest.raises(MissingDataError, match="execute_diffusion_1_256x256"):
        Session.of(run).result("serving")


def test_step_time_model_recovers_coefficients() -> None:
    rng = [
        (p, d, k) for p, d, k in [(0, 8, 100), (0, 16, 300), (512, 0, 512), (256, 8, 900), (0, 32, 2000), (128, 4, 50)]
    ]
    steps = pl.DataFrame(
        {
            "prefill_tokens": [p for p, _, _ in rng],
            "decode_tokens": [d for _, d, _ in rng],
            "kv_tokens": [k for _, _, k in rng],
            "step_ms": [2.0 + 0.01 * p + 0.1 * d + 0.001 * k for p, d, k in rng],
        }
    )
    fit = fit_step_time(steps)
    assert fit["steps"] == 6 and fit["terms"] == "prefill_tokens, decode_tokens, kv_tokens"
    assert fit["intercept_ms"] == pytest.approx(2.0)
    assert fit["ms_per_prefill_token"] == pytest.approx(0.01)
    assert fit["ms_per_decode_token"] == pytest.approx(0.1)
    assert fit["ms_per_kv_token"] == pytest.approx(0.001)
    assert fit["r2"] == pytest.approx(1.0)


def test_step_time_model_drops_constant_terms_and_needs_steps() -> None:
    steps = pl.DataFrame(
        {
            "prefill_tokens": [0, 0, 0, 0],
            "decode_tokens": [8, 16, 24, 32],
            "kv_tokens": [None] * 4,
            "step_ms": [1.0, 1.5, 2.5, 3.0],
        },
        schema={"prefill_tokens": pl.Int64, "decode_tokens": pl.Int64, "kv_tokens": pl.Int64, "step_ms": pl.Float64},
    )
    fit = fit_step_time(steps)
    assert fit["terms"] == "decode_tokens" and fit["ms_per_prefill_token"] is None
    assert fit["ms_per_decode_token"] == pytest.approx(0.0875)
    assert fit["r2"] == pytest.approx(0.98)
    one = fit_step_time(steps.head(2))
    assert one["r2"] is None and one["note"] == "2 steps: too few for 2 coefficients and a residual"
