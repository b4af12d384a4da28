"""``ranksight mcp`` through the MCP client over stdio (issue 21, item 7; acceptance: the server
answers ``initialize`` and ``tools/list``, and a tool call returns the same numbers as the CLI's
``--format json``).

The client is the ``mcp`` package's own (``stdio_client`` + ``ClientSession``): it spawns
``python -m ranksight mcp`` and speaks JSON-RPC on the child's stdin/stdout. Skipped loudly when
the package is not installed (``pip install 'ranksight[mcp]'``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import Any

import pytest

try:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
except ImportError:  # pragma: no cover - depends on the environment
    _MSG = "SKIPPED LOUDLY: the mcp package is not installed (pip install 'ranksight[mcp]'); ranksight mcp not tested"
    warnings.warn(_MSG)
    pytest.skip(_MSG, allow_module_level=True)

TRACE_FILTER = "hta/trace_filter"  # 2 ranks, distributedInfo
R50 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples"
W0 = f"{R50}/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
W4 = f"{R50}/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"

TOOLS = {"load_run", "list_runs", "unload_run", "list_analyses", "analyze", "diagnose", "diff"}


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def cli_json(*args: str) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "ranksight", *args, "--no-cache", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def session(script) -> Any:  # noqa: ANN001
    """Run ``await script(session)`` against a fresh ``ranksight mcp`` child."""

    async def main() -> Any:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "ranksight", "mcp"],
            env={"RANKSIGHT_CACHE_DIR": os.environ["RANKSIGHT_CACHE_DIR"], "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        with open(os.devnull, "w") as errlog:  # the server logs tool errors on its stderr
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                init = await s.initialize()
                return await script(s, init)

    return anyio.run(main)


def test_initialize_list_tools_and_the_numbers_of_the_cli(data):
    trace_dir = str(data(TRACE_FILTER))

    async def script(s, init):  # noqa: ANN001
        info = getattr(init, "server_info", None) or init.serverInfo
        assert info.name == "ranksight"
        listed = await s.list_tools()
        by_name = {t.name: t for t in listed.tools}
        assert set(by_name) == TOOLS
        schema = getattr(by_name["analyze"], "input_schema", None) or by_name["analyze"].inputSchema
        assert schema["required"] == ["analysis"] and {"run", "options", "ranks"} <= set(schema["properties"])

        loaded = await s.call_tool("load_run", {"paths": [trace_dir], "cache": False})
        assert not is_error(loaded), text(loaded)
        run = json.loads(text(loaded))
        assert run["run"] == "run-1" and run["ranks"] == [0, 1]
        assert [(f["rank"], os.path.basename(f["path"]), f["rank_from"]) for f in run["files"]] == [
            (0, "sampled_rank-0.json.gz", "distributedInfo"),
            (1, "sampled_rank-1.json.gz", "distributedInfo"),
        ]
        out = {}
        for name, opts in (("temporal", {}), ("kernels", {"num_kernels": 3, "include_memory": False})):
            r = await s.call_tool("analyze", {"analysis": name, "run": "run-1", "options": opts})
            assert not is_error(r), text(r)
            out[name] = json.loads(text(r))
        r = await s.call_tool("analyze", {"analysis": "temporal", "run": "run-1", "ranks": [1]})
        out["temporal rank 1"] = json.loads(text(r))
        r = await s.call_tool("diagnose", {"run": "run-1"})
        assert not is_error(r), text(r)
        out["diagnose"] = json.loads(text(r))
        analyses = json.loads(text(await s.call_tool("list_analyses", {})))["analyses"]
        out["list"] = {a["name"]: a for a in analyses}
        return out

    got = session(script)
    # the documents the CLI prints, number for number (ranksight_version, options and all)
    assert got["temporal"] == cli_json("analyze", "temporal", trace_dir)
    assert got["temporal"]["tables"]["temporal"][0]["rank"] == 0 and len(got["temporal"]["tables"]["temporal"]) == 2
    assert got["kernels"] == cli_json("analyze", "kernels", trace_dir, "--num-kernels", "3", "--no-include-memory")
    assert got["kernels"]["options"]["num_kernels"] == 3 and got["kernels"]["options"]["include_memory"] is False
    assert got["temporal rank 1"] == cli_json("analyze", "temporal", trace_dir, "--rank", "1")
    assert got["diagnose"] == cli_json("diagnose", trace_dir)
    assert got["diagnose"]["schema_version"] >= 1
    kernels = got["list"]["kernels"]
    assert {o["name"]: (o["type"], o["default"]) for o in kernels["options"]}["num_kernels"] == ("int", 10)
    assert {o["name"]: o["type"] for o in kernels["options"]}["include_memory"] == "bool"
    assert got["list"]["memory"]["without_run"] == ["snapshot"]


def test_diff_tool_equals_the_cli_and_gate(data):
    base, test = str(data(W4)), str(data(W0))

    async def script(s, init):  # noqa: ANN001
        for p in (base, test):
            assert not is_error(await s.call_tool("load_run", {"paths": [p], "cache": False}))
        r = await s.call_tool(
            "diff", {"base": "run-1", "test": "run-2", "fail_if_slower": 5, "metrics": ["step_time", "kernel"]}
        )
        assert not is_error(r), text(r)
        runs = json.loads(text(await s.call_tool("list_runs", {})))
        gone = json.loads(text(await s.call_tool("unload_run", {"run": "run-1"})))
        return json.loads(text(r)), runs, gone

    doc, runs, gone = session(script)
    want = cli_json("diff", base, test, "--fail-if-slower", "5%", "--metric", "step_time,kernel")
    assert doc == want
    assert doc["gate"]["failed"] is True and [c["failed"] for c in doc["gate"]["checks"]] == [True, False]
    assert doc["gate"]["line"].startswith("FAIL: step_time +25.9% (mean 141.1 → 177.6 ms")
    assert [r["run"] for r in runs["runs"]] == ["run-1", "run-2"] and gone == {"unloaded": "run-1", "runs": ["run-2"]}


def test_errors_are_tool_errors_with_the_cli_line(data, tmp_path):
    async def script(s, init):  # noqa: ANN001
        missing = await s.call_tool("load_run", {"paths": [str(tmp_path / "nope.json")]})
        no_run = await s.call_tool("analyze", {"analysis": "temporal", "run": "run-9"})
        await s.call_tool("load_run", {"paths": [str(data(TRACE_FILTER))], "cache": False})
        bad_opt = await s.call_tool("analyze", {"analysis": "kernels", "run": "run-1", "options": {"warp": 1}})
        bad_val = await s.call_tool("analyze", {"analysis": "kernels", "run": "run-1", "options": {"num_kernels": "x"}})
        bad_name = await s.call_tool("analyze", {"analysis": "nope", "run": "run-1"})
        return missing, no_run, bad_opt, bad_val, bad_name

    missing, no_run, bad_opt, bad_val, bad_name = session(script)
    assert all(is_error(r) for r in (missing, no_run, bad_opt, bad_val, bad_name))
    assert f"{tmp_path / 'nope.json'}: no such file or directory" in text(missing)
    assert "no run 'run-9'; runs held: none (call load_run first)" in text(no_run)
    assert "kernels has no option warp; options: num_kernels, duration_ratio" in text(bad_opt)
    assert "option num_kernels: invalid literal for int()" in text(bad_val)
    assert "unknown analysis 'nope'; analyses: alignment" in text(bad_name)


def test_without_the_mcp_package_the_command_says_how_to_install_it():
    code = "import sys; sys.modules['mcp'] = None; from ranksight.cli import main; sys.exit(main(['mcp']))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "ranksight: error: ranksight mcp needs the mcp package: pip install 'ranksight[mcp]' (or: pip install mcp)"
    )
