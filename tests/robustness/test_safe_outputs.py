"""Safe by default (issue 8): outputs are atomic, inputs and existing files are never overwritten
without ``--force``, a failed command leaves nothing half-written, and nothing from a trace is
executed or unpickled (an audit of the package source)."""

from __future__ import annotations

import ast
import hashlib
import shutil
from pathlib import Path

import pytest
from _helpers import cli

import ranksight

DATA = Path(__file__).resolve().parents[1] / "data"
SRC = Path(ranksight.__file__).resolve().parent
AMD = DATA / "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    return Path(shutil.copy(AMD, d / "rank0.json.gz"))


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.rglob("*") if p.name.startswith((".ranksight-", ".tmp")))


def test_export_failing_on_a_bad_input_writes_nothing(tmp_path):
    good = _copy(tmp_path)
    bad = tmp_path / "in" / "rank1.json"
    bad.write_text('{"traceEvents": [{"ph": "X"}, {"ph" "X"}]}')
    out = tmp_path / "out"
    r = cli("export", good.parent, "-o", out)
    assert r.rc == 2 and len(r.err.splitlines()) == 1 and str(bad) in r.err
    assert not out.exists()


def test_export_never_overwrites_without_force(tmp_path):
    good = _copy(tmp_path)
    out = tmp_path / "out"
    assert cli("export", good, "--to", out).rc == 0
    target = out / "rank0.events.parquet"
    target.write_bytes(b"precious")
    r = cli("export", good, "--to", out)
    assert r.rc == 2 and "exists; use --force to overwrite" in r.err
    assert target.read_bytes() == b"precious"
    assert cli("export", good, "--to", out, "--force").rc == 0
    assert target.read_bytes()[:4] == b"PAR1" and _leftovers(out) == []


def test_report_refuses_to_overwrite_an_input_or_an_existing_file(tmp_path):
    good = _copy(tmp_path)
    before = _digest(good)
    r = cli("report", good, "-o", good, "--force")
    assert r.rc == 2 and "refusing to overwrite an input" in r.err
    assert _digest(good) == before
    existing = tmp_path / "r.html"
    existing.write_text("mine")
    r = cli("report", good, "-o", existing)
    assert r.rc == 2 and "exists; use --force to overwrite" in r.err
    assert existing.read_text() == "mine"


def test_counters_refuse_existing_outputs_and_never_touch_inputs(tmp_path):
    good = _copy(tmp_path)
    before = _digest(good)
    assert cli("counters", good, "-o", good.parent).rc == 0
    r = cli("counters", good, "-o", good.parent)
    assert r.rc == 2 and "use --force" in r.err
    assert _digest(good) == before and _leftovers(good.parent) == []


# ---- nothing from a trace is executed or unpickled --------------------------------------------------

FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}
#: builtins called by bare name (``re.compile`` and polars' ``list.eval`` are fine)
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_METHODS = {"read_pickle", "to_pickle"}


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _violations(path: Path, root: Path = SRC) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            bad += [f"{where} import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            bad.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_BUILTINS:
                bad.append(f"{where} {f.id}()")
            elif isinstance(f, ast.Attribute) and f.attr in FORBIDDEN_METHODS:
                bad.append(f"{where} .{f.attr}()")
            # numpy.load(allow_pickle=True), subprocess(..., shell=True)
            bad += [
                f"{where} {kw.arg}=True"
                for kw in node.keywords
                if kw.arg in ("allow_pickle", "shell") and isinstance(kw.value, ast.Constant) and kw.value.value is True
            ]
    return bad


#: Reviewed exceptions: PyTorch memory snapshots are pickles by format; this module reads them
#: with an unpickler that refuses every global (checked below), so no code from the file runs.
ALLOWED = {"io/memory_snapshot.py": {"import pickle"}}


def test_no_unpickling_or_eval_in_the_package():
    files = _sources()
    assert len(files) > 20
    bad = []
    for p in files:
        rel = str(p.relative_to(SRC))
        bad += [v for v in _violations(p) if v.split(" ", 1)[1] not in ALLOWED.get(rel, set())]
    assert bad == []


class _Evil:
    def __reduce__(self):  # noqa: ANN204
        return (print, ("unpickled code ran",))


def test_the_memory_snapshot_unpickler_refuses_code(capsys):
    pickle = pytest.importorskip("pickle")
    ms = pytest.importorskip("ranksight.io.memory_snapshot")
    import io

    payload = pickle.dumps({"segments": [_Evil()]}, protocol=4)
    with pytest.raises(pickle.UnpicklingError):
        ms.SafeUnpickler(io.BytesIO(payload)).load()
    assert "unpickled code ran" not in capsys.readouterr().out
    assert ms.SafeUnpickler(io.BytesIO(pickle.dumps({"segments": [1, "a", None]}))).load() == {
        "segments": [1, "a", None]
    }


def test_the_audit_can_fail(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import pickle\nx = eval('1')\nimport numpy as np\nnp.load('f', allow_pickle=True)\n")
    assert _violations(probe, tmp_path) == [
        "probe.py:1 import pickle",
        "probe.py:2 eval()",
        "probe.py:4 allow_pickle=True",
    ]
