"""``ranksight diff … --junit FILE``: the CI gate's checks as a JUnit XML report (issue 21, item 7).

The real pair: ResNet-50 with ``num_workers`` 4 as the base and 0 as the test (the 2021 TB-plugin
samples), so the step got slower (141.1 → 177.6 ms mean, p = 0.015), the DataLoader much slower,
the kernels not, and MFU dropped (numbers in docs/diff.md and tests/integration/test_diff_real.py).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

R50 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples"
W0 = f"{R50}/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
W4 = f"{R50}/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


def numbers(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)


def test_one_testcase_per_check_failures_with_numbers(cli, data, tmp_path):
    out = tmp_path / "gate.xml"
    r = cli(
        "diff", str(data(W4)), str(data(W0)), "--fail-if-slower", "5%",
        "--metric", "step_time,kernel", "--metric", "dataloader", "--metric", "mfu", "--junit", str(out),
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    verdicts = [line for line in r.stdout.splitlines() if line.startswith(("PASS: ", "FAIL: "))]
    assert [v[:5] for v in verdicts] == ["FAIL:", "PASS:", "FAIL:", "FAIL:"]

    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "3", "0")
    [suite] = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "4",
        "3",
        "0",
        "0",
    )
    assert suite.get("name") == "ranksight diff worker0.1623212756351 -> worker0.1623143089861"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["threshold_pct"] == "5" and props["alpha"] == "0.05"
    assert props["base"] == str(data(W4)) and props["test"] == str(data(W0))
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["step_time", "kernel", "dataloader", "mfu"]
    assert all(c.get("classname") == "ranksight.diff.gate" for c in cases)

    step, kernel, loader, mfu = cases
    fail = step.find("failure")
    assert fail is not None and fail.get("type") == "regression"
    assert (
        fail.get("message")
        == verdicts[0]
        == (
            "FAIL: step_time +25.9% (mean 141.1 → 177.6 ms; 95% CI +7.0% … +44.7%, Welch p = 0.015): "
            "significantly slower by more than 5%"
        )
    )
    n = numbers(fail.text or "")
    assert n["metric"] == "step_time" and n["unit"] == "ms" and n["change"] == "increased"
    assert float(n["base_median"]) == pytest.approx(126.682) and float(n["test_median"]) == pytest.approx(177.443)
    assert float(n["delta"]) == pytest.approx(36.524, abs=1e-3) and float(n["p_value"]) == pytest.approx(
        0.0154, abs=1e-4
    )
    assert float(n["delta_pct"]) == pytest.approx(25.891, abs=1e-3)

    assert kernel.find("failure") is None and kernel.find("error") is None
    assert (kernel.findtext("system-out") or "").startswith("PASS: kernel -0.6%")
    assert numbers(kernel.findtext("system-out") or "")["change"] == "unchanged"

    assert loader.find("failure").get("message") == verdicts[2]
    assert float(numbers(loader.find("failure").text)["test_median"]) == pytest.approx(59.463)
    assert mfu.find("failure").get("message").startswith("FAIL: mfu -22.3% (mean 42.83 → 33.26 %")


def test_passing_gate_and_json_checks(cli, data, tmp_path):
    out = tmp_path / "gate.xml"
    r = cli(
        "diff", str(data(W0)), str(data(W4)), "--fail-if-slower", "5%", "--metric", "step_time", "--metric", "kernel",
        "--junit", str(out), "--format", "json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    root = ET.parse(out).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "0", "0")
    assert not list(root.iter("failure")) and not list(root.iter("error"))
    gate = json.loads(r.stdout)["gate"]
    assert gate["failed"] is False and [c["metric"] for c in gate["checks"]] == ["step_time", "kernel"]
    assert gate["metric"] == "step_time" and gate["line"] == gate["checks"][0]["line"]


def test_undecidable_check_is_an_error_and_exit_2(cli, data, tmp_path):
    """An unknown metric is an <error> testcase (written before the command fails with exit 2)."""
    out = tmp_path / "gate.xml"
    r = cli("diff", str(data(W4)), str(data(W0)), "--fail-if-slower", "5%", "--metric", "step_time,warp_speed",
            "--junit", str(out))  # fmt: skip
    assert r.returncode == 2
    assert "unknown metric 'warp_speed' for these traces" in r.stderr
    root = ET.parse(out).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "1")
    err = root.find("testsuite/testcase[@name='warp_speed']/error")
    assert err is not None and err.get("type") == "UsageError"
    assert err.get("message").startswith("unknown metric 'warp_speed' for these traces; choose from: step_time")


def test_junit_needs_the_gate_and_an_unused_path(cli, data, tmp_path):
    out = tmp_path / "gate.xml"
    r = cli("diff", str(data(W0)), str(data(W4)), "--junit", str(out))
    assert (
        r.returncode == 2 and "--junit writes the gate's checks: give the threshold with --fail-if-slower" in r.stderr
    )
    assert not out.exists()
    out.write_text("old")
    r = cli("diff", str(data(W0)), str(data(W4)), "--fail-if-slower", "5%", "--junit", str(out))
    assert r.returncode == 2 and "exists; use --force to overwrite" in r.stderr and out.read_text() == "old"
    r = cli("diff", str(data(W0)), str(data(W4)), "--fail-if-slower", "5%", "--junit", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert ET.parse(out).getroot().get("tests") == "1"
