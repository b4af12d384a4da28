"""The README's examples are true (issue 21): every `$ command` shown in its console/bash/text blocks
runs, and its output is the text shown.

How a block is read
- A fenced block (```console, ```bash, ```text, ```sh) whose lines start with ``$ `` is a session:
  each ``$ `` line is a command (a line ending in ``\\`` continues on the next), the lines after it
  up to the next command are its output as shown. ``$ NAME=value`` sets a variable for the
  commands that follow, in this block and the later ones (``$S``, ``${F}`` are expanded).
- ``ranksight …`` runs in this process (``ranksight.cli.main``) in a scratch folder where
  ``tests/`` and ``src/`` are the checkout's, with ``COLUMNS`` set to :data:`COLUMNS` (the width
  the README's tables are printed at); stdout and stderr are shown together, in the order written.
  ``| filter`` (head, cut, sed) runs the filter on its stdout (stderr first, as a terminal shows
  it); ``> FILE`` writes stdout to FILE (only stderr is shown). ``echo $?`` is the last exit code;
  other commands (``zcat``, ``python -c``, ``head``) run in bash (``python`` is this interpreter).
- ``# trimmed`` (or any comment with "trimmed") after a command, or an elision line in its output
  (``...``, ``…``, ``[…]``, ``[… what …]``), makes the check "every line shown appears in the real
  output, in this order"; otherwise the output must be exactly the text shown.
- ``<!-- readme-test: skip REASON -->`` on the line before a block leaves it unchecked (a command
  that needs a Dask cluster or a folder of the reader's own); it is reported as a loud skip, as
  is a command whose input lies in ``../shared`` when that folder is absent.

Normalisation (what may legitimately differ, applied to both sides): trailing spaces and blank
lines at the end; an absolute path up to ``/ranksight/`` is ``.../ranksight/`` (the example
traces live in the checkout or in site-packages); date-times (``2026-11-25 09:30:10``) and
12-hex-digit cache keys; ``time="…"`` in JUnit XML; the size in MB of a written report or trace
(``Wrote x.json.gz (0.3 MB)``), and the report's section counts and size (``31 of 36 sections
shown; 0.39 MB``, ``Report (31 sections, 0.37 MB)``: they change with every report section added
to ranksight, not with the example). Nothing else: every other number must match.

``python tests/integration/test_readme.py [LINE]`` prints the real output of every command (or of
the block at README line LINE), for pasting when an example changes on purpose.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHARED = ROOT.parent / "shared"

#: The width (COLUMNS) the README's terminal tables are printed at.
COLUMNS = 200

_LANGS = {"console", "bash", "text", "sh", "shell"}
_FENCE = re.compile(r"^```(\w*)\s*$")
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b\s*(.*?)\s*-->")
_ELISION = re.compile(r"^\s*(\.\.\.|…|\[…\]|\[… .* …\]|\[\.\.\. .* \.\.\.\]|\[…\s.*\])\s*$")


@dataclass
class Command:
    line: int  # README line of the `$ ` line
    text: str  # the command, continuation lines joined, comment removed
    comment: str  # the `# …` comment after it, if any
    shown: list[str] = field(default_factory=list)

    @property
    def trimmed(self) -> bool:
        return "trimmed" in self.comment or any(_ELISION.match(s) for s in self.shown)


@dataclass
class Block:
    line: int  # README line of the opening fence
    skip: str | None
    commands: list[Command]


def _strip_comment(cmd: str) -> tuple[str, str]:
    """The command without a trailing ``# comment`` (outside quotes), and the comment."""
    quote = None
    for i, ch in enumerate(cmd):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or cmd[i - 1].isspace()):
            return cmd[:i].rstrip(), cmd[i + 1 :].strip()
    return cmd.rstrip(), ""


def parse(text: str) -> list[Block]:
    """The README's session blocks."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1 : j]
        i = j + 1
        if lang not in _LANGS or not any(b.startswith("$ ") for b in body):
            continue
        prev = lines[start - 1] if start > 0 else ""
        skip = _SKIP.search(prev)
        cmds: list[Command] = []
        k = 0
        while k < len(body):
            b = body[k]
            if b.startswith("$ "):
                parts = [b[2:]]
                line = start + 2 + k
                while parts[-1].rstrip().endswith("\\") and k + 1 < len(body):
                    parts[-1] = parts[-1].rstrip()[:-1]
                    k += 1
                    parts.append(body[k].strip())
                cmd, comment = _strip_comment(" ".join(p.strip() for p in parts))
                cmds.append(Command(line, cmd, comment))
            elif cmds:
                cmds[-1].shown.append(b)
            k += 1
        blocks.append(Block(start + 1, skip.group(1) if skip else None, cmds))
    return blocks


# ---- normalisation -------------------------------------------------------------------------

_NORMALISE = [
    (re.compile(r"(?<![\w.])/[^\s()'\",]*?/ranksight/"), ".../ranksight/"),
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b"), "<date-time>"),
    (re.compile(r"\b[0-9a-f]{12}\b"), "<key>"),
    (re.compile(r'\btime="[0-9.]+"'), 'time="<s>"'),
    (re.compile(r"^\d+ of \d+ sections shown; \d+(\.\d+)? MB$"), "<n> of <m> sections shown; <size> MB"),
    (re.compile(r"^Report \(\d+ sections, \d+(\.\d+)? MB\)"), "Report (<n> sections, <size> MB)"),
    (re.compile(r"^(Wrote \S+ )\(\d+(\.\d+)? MB\)"), r"\1(<size> MB)"),
]


def normalise(line: str) -> str:
    line = line.rstrip()
    for rx, repl in _NORMALISE:
        line = rx.sub(repl, line)
    return line


def _lines(text: str) -> list[str]:
    out = [normalise(x) for x in text.splitlines()]
    while out and not out[-1]:
        out.pop()
    return out


# ---- running -------------------------------------------------------------------------------


def _expand(cmd: str, env: dict[str, str]) -> str:
    """``$NAME`` / ``${NAME}`` of the README's own variables (others are left to the shell)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))

    return re.sub(r"\$\{(\w+)\}|\$([A-Za-z_]\w*)", sub, cmd)


def _split_shell(cmd: str) -> tuple[str, str]:
    """The first command of a pipeline and the rest (``| …`` or ``> …``), outside quotes."""
    quote = None
    for i, ch in enumerate(cmd):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "|>":
            return cmd[:i].rstrip(), cmd[i:].strip()
    return cmd, ""


@dataclass
class Shell:
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    rc: int = 0

    def run(self, command: str) -> str:
        cmd = _expand(command, self.env)
        m = re.fullmatch(r"([A-Za-z_]\w*)=(\S+)", cmd)
        if m:
            self.env[m.group(1)] = m.group(2)
            return ""
        if cmd == "echo $?":
            return f"{self.rc}\n"
        first, rest = _split_shell(cmd)
        argv = shlex.split(first)
        if argv and argv[0] == "ranksight":
            return self._ranksight(argv[1:], rest)
        return self._bash(cmd)

    def _ranksight(self, argv: list[str], rest: str) -> str:
        from ranksight.cli import main

        out, err, both = io.StringIO(), io.StringIO(), io.StringIO()
        separate = bool(rest)
        old_cwd, old_cols = os.getcwd(), os.environ.get("COLUMNS")
        os.chdir(self.cwd)
        os.environ["COLUMNS"] = str(COLUMNS)
        try:
            with (
                contextlib.redirect_stdout(out if separate else both),
                contextlib.redirect_stderr(err if separate else both),
                warnings.catch_warnings(),
            ):
                warnings.simplefilter("default")
                try:
                    self.rc = main(argv)
                except SystemExit as e:  # argparse
                    self.rc = int(e.code or 0)
        finally:
            os.chdir(old_cwd)
            if old_cols is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = old_cols
        if not separate:
            return both.getvalue()
        if rest.startswith(">"):
            (self.cwd / shlex.split(rest[1:])[0]).write_text(out.getvalue())
            return err.getvalue()
        r = subprocess.run(
            ["bash", "-c", rest[1:].strip()],
            input=out.getvalue(),
            capture_output=True,
            text=True,
            cwd=self.cwd,
            timeout=60,
        )
        return err.getvalue() + r.stdout

    def _bash(self, cmd: str) -> str:
        cmd = re.sub(r"^python3? ", shlex.quote(sys.executable) + " ", cmd)
        r = subprocess.run(
            ["bash", "-c", cmd],
            capture_output=True,
            text=True,
            cwd=self.cwd,
            timeout=120,
            env={**os.environ, **self.env},
        )
        self.rc = r.returncode
        return r.stdout + r.stderr


def scratch(tmp: Path) -> Path:
    """A folder to run the README's commands in: ``tests/`` and ``src/`` are the checkout's."""
    for name in ("tests", "src"):
        link = tmp / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    return tmp


def _needs_shared(cmd: str) -> bool:
    return "../shared" in cmd or "/shared/" in cmd


# ---- the test ------------------------------------------------------------------------------

BLOCKS = parse(README.read_text(encoding="utf-8"))


def _env_before(block: Block) -> dict[str, str]:
    """The README variables (``$ S=…``) set by the blocks before this one."""
    env: dict[str, str] = {}
    for b in BLOCKS:
        if b.line >= block.line:
            break
        for c in b.commands:
            m = re.fullmatch(r"([A-Za-z_]\w*)=(\S+)", c.text)
            if m:
                env[m.group(1)] = _expand(m.group(2), env)
    return env


def check(block: Block, shell: Shell) -> list[str]:
    """Run a block's commands; the differences between what is shown and what they print."""
    problems = []
    for c in block.commands:
        real = _lines(shell.run(c.text))
        shown = _lines("\n".join(c.shown))
        where = f"README.md:{c.line}: $ {c.text}"
        if c.trimmed:
            pos = 0
            for s in (s for s in shown if not _ELISION.match(s)):
                try:
                    pos = real.index(s, pos) + 1
                except ValueError:
                    near = [r for r in real if s[:30] and s[:30] in r][:1]
                    problems.append(f"{where}\n  shown line not in the output (in order): {s!r}\n  near: {near}")
                    break
        elif real != shown:
            diff = next(
                (i for i, (a, b) in enumerate(zip(real, shown, strict=False)) if a != b), min(len(real), len(shown))
            )
            problems.append(
                f"{where}\n  first difference at output line {diff + 1}:\n"
                f"  shown: {shown[diff] if diff < len(shown) else '<end>'!r}\n"
                f"  real:  {real[diff] if diff < len(real) else '<end>'!r}"
            )
    return problems


def _loud_skip(msg: str) -> None:
    warnings.warn(f"SKIPPED LOUDLY: {msg}", stacklevel=2)
    pytest.skip(msg)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_readme_block(block: Block, tmp_path: Path) -> None:
    if block.skip is not None:
        _loud_skip(f"README.md:{block.line} not checked: {block.skip}")
    if any(_needs_shared(c.text) for c in block.commands) and not SHARED.exists():
        _loud_skip(f"README.md:{block.line} needs {SHARED}, which is absent")
    shell = Shell(scratch(tmp_path), _env_before(block))
    problems = check(block, shell)
    assert not problems, "the README shows what these commands no longer print:\n" + "\n".join(problems)


def test_the_readme_has_its_examples() -> None:
    """The parser finds the README's sessions (a README without examples would pass trivially)."""
    commands = [c for b in BLOCKS for c in b.commands]
    assert len(BLOCKS) >= 20 and len(commands) >= 40
    assert sum(1 for c in commands if c.text.startswith("ranksight ")) >= 35


def test_parse_and_compare_rules(tmp_path: Path) -> None:
    """The rules above, on a README of four lines: exact unless trimmed, elisions, normalisation."""
    text = "\n".join(
        [
            "```console",
            "$ X=1",
            "$ echo a; echo b   # trimmed",
            "b",
            "$ echo $X \\",
            "  /work/x/src/ranksight/data 2026-01-02 03:04:05",
            "1 .../ranksight/data <date-time>",
            "```",
            "```text",
            "$ echo c",
            "...",
            "d",
            "```",
        ]
    )
    blocks = parse(text)
    assert [len(b.commands) for b in blocks] == [3, 1]
    assert blocks[0].commands[1].trimmed and not blocks[0].commands[2].trimmed and blocks[1].commands[0].trimmed
    shell = Shell(scratch(tmp_path))
    assert check(blocks[0], shell) == []
    assert shell.env == {"X": "1"}
    problems = check(blocks[1], shell)
    assert len(problems) == 1 and "shown line not in the output (in order): 'd'" in problems[0]
    exact = parse("```console\n$ echo e; echo f\ne\ng\n```")[0]
    problems = check(exact, shell)
    assert len(problems) == 1 and "shown: 'g'" in problems[0] and "real:  'f'" in problems[0]


def main(argv: list[str]) -> None:
    """Print the real output of the README's commands (of the block at line LINE)."""
    import tempfile

    want = int(argv[0]) if argv else None
    for b in BLOCKS:
        if want is not None and not b.line <= want <= b.line + 2 + sum(1 + len(c.shown) for c in b.commands):
            continue
        shell = Shell(scratch(Path(tempfile.mkdtemp())), _env_before(b))
        print(f"==== README.md:{b.line}" + (f" (skipped: {b.skip})" if b.skip else ""))
        if b.skip:
            continue
        for c in b.commands:
            print(f"$ {c.text}" + (f"   # {c.comment}" if c.comment else ""))
            sys.stdout.write("\n".join(x.rstrip() for x in shell.run(c.text).splitlines()) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1:])
