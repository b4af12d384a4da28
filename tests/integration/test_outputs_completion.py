"""``ranksight completion bash|zsh|fish``: scripts generated from the parser, run in the shells.

bash is always there; zsh and fish are checked when installed (skipped loudly otherwise)."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from ranksight.cli import main
from ranksight.cli.completion import command_tree, script

#: (words typed, with the word under the cursor last) -> what must be offered (exactly)
CASES = {
    ("an",): ["analyze"],
    ("analyze", "tem"): ["temporal"],
    ("analyze", "temporal", "t.json", "--format", ""): ["table", "markdown", "csv", "json"],
    ("analyze", "temporal", "--rank", "0", "--per"): ["--per-step"],
    ("analyze", "kernels", "x", "--no-inc"): ["--no-include-memory"],
    ("diagnose", "--format", ""): ["table", "json"],
    ("cache", ""): ["info", "verify", "clear"],
    ("completion", ""): ["bash", "zsh", "fish"],
    ("export", "x", "--t"): ["--tables"],  # --to: a deprecated spelling, parsed but never offered
}


def _bash(tmp_path: Path, words: tuple[str, ...]) -> list[str]:
    f = tmp_path / "ranksight.bash"
    f.write_text(script("bash"))
    arr = " ".join("'" + w + "'" for w in ("ranksight", *words))
    cmd = (
        f"source {f}; COMP_WORDS=({arr}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); _ranksight; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if line]


def test_bash_completes_commands_options_and_choices(tmp_path: Path) -> None:
    for words, want in CASES.items():
        assert _bash(tmp_path, words) == want, words


def test_bash_completes_files_for_traces(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "rank0.json").write_text("{}")
    f = tmp_path / "ranksight.bash"
    f.write_text(script("bash"))
    cmd = (
        f"cd {tmp_path / 'traces'}; source {f}; COMP_WORDS=(ranksight analyze temporal rank); COMP_CWORD=3; _ranksight; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["rank0.json"]


def test_tree_is_the_parser() -> None:
    """Every analysis and every option of the parser is in the tree; hidden spellings are not."""
    from ranksight.analyses import REGISTRY

    root = command_tree()
    assert set(root.commands["analyze"].commands) == set(REGISTRY)
    t = root.commands["analyze"].commands["temporal"]
    assert {"--format", "--table", "-o", "--output", "--per-step", "--no-per-step", "--rank"} <= set(t.options)
    assert t.values["--format"] == ("table", "markdown", "csv", "json") and t.values["--rank"] == ()
    assert "--to" not in root.commands["export"].options and "-o" in root.commands["export"].options


def test_command_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    out = capsys.readouterr().out
    assert out == script("bash") and "complete -F _ranksight ranksight" in out


def _need(shell: str) -> str:
    path = shutil.which(shell)
    if path is None:
        msg = f"SKIPPED LOUDLY: {shell} is not installed; its completion script is not checked"
        warnings.warn(msg, stacklevel=2)
        pytest.skip(msg)
    return path


def test_zsh_script(tmp_path: Path) -> None:
    zsh = _need("zsh")
    f = tmp_path / "_ranksight"
    f.write_text(script("zsh"))
    assert subprocess.run([zsh, "-n", str(f)], capture_output=True, text=True).returncode == 0
    for words, want in CASES.items():
        q = " ".join("'" + w + "'" for w in words)
        r = subprocess.run(
            [zsh, "-c", f"source {f} 2>/dev/null; _ranksight_offer '{words[-1]}' {q}"], capture_output=True, text=True
        )
        kind, _, offered = r.stdout.strip().partition(" ")
        assert kind == "W", (words, r.stdout, r.stderr)
        assert [w for w in offered.split() if w.startswith(words[-1])] == want, words


def test_fish_script(tmp_path: Path) -> None:
    fish = _need("fish")
    f = tmp_path / "ranksight.fish"
    f.write_text(script("fish"))
    assert subprocess.run([fish, "-n", str(f)], capture_output=True, text=True).returncode == 0
    for words, want in CASES.items():
        line = " ".join(["ranksight", *words])
        r = subprocess.run([fish, "-c", f"source {f}; complete -C{line!r}"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got = [x.split("\t")[0] for x in r.stdout.splitlines()]
        assert sorted(got) == sorted(want), (words, got)
