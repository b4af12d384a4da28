""".github/workflows/release.yml (issue 21): not run here (the project is not published), so this
checks what can be checked offline: it is valid YAML, builds every platform the README promises
from this repository's layout, and publishes only from a tag."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "release.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    try:
        import yaml
    except ImportError:
        msg = "SKIPPED LOUDLY: PyYAML is not installed (it comes with the test extra, through mkdocs)"
        warnings.warn(msg)
        pytest.skip(msg)
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _maturin_steps(job: dict) -> list[dict]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith("PyO3/maturin-action@")]


def test_release_workflow_builds_every_platform_from_this_layout(workflow):
    jobs = workflow["jobs"]
    assert set(jobs) == {"linux", "windows", "macos", "sdist", "release"}
    targets = {
        name: [p["target"] for p in jobs[name]["strategy"]["matrix"]["platform"]]
        for name in ("linux", "windows", "macos")
    }
    assert targets == {"linux": ["x86_64", "aarch64"], "windows": ["x64", "aarch64"], "macos": ["x86_64", "aarch64"]}
    for name in ("linux", "windows", "macos", "sdist"):
        steps = _maturin_steps(jobs[name])
        assert steps, name
        for step in steps:
            # pyproject.toml is at the root, the crate is not
            assert "--manifest-path rust/Cargo.toml" in step["with"]["args"], (name, step)
            assert "--out dist" in step["with"]["args"], (name, step)
    # the same glibc floor as the local build (tests/packaging/test_wheel.py)
    assert [s["with"]["manylinux"] for s in _maturin_steps(jobs["linux"])] == ["2_28"]  # a string


def test_release_workflow_publishes_only_from_a_tag(workflow):
    release = workflow["jobs"]["release"]
    assert set(release["needs"]) == {"linux", "windows", "macos", "sdist"}
    publish = [s for s in release["steps"] if s.get("name") == "Publish to PyPI"]
    assert len(publish) == 1
    assert publish[0]["if"] == "${{ startsWith(github.ref, 'refs/tags/') }}"
    assert "secrets.PYPI_API_TOKEN" in publish[0]["env"]["UV_PUBLISH_TOKEN"]
