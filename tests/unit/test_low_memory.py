"""RANKSIGHT_LOW_MEMORY and the allocator settings behind it (docs/scale.md)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from ranksight import _core


def _env_after_import(**env: str) -> str:
    code = "import ranksight, os; print(ranksight.LOW_MEMORY, os.environ.get('_RJEM_MALLOC_CONF'))"
    e = {k: v for k, v in os.environ.items() if k not in ("RANKSIGHT_LOW_MEMORY", "_RJEM_MALLOC_CONF")}
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_low_memory_sets_the_polars_allocator_policy() -> None:
    # polars writes its own defaults first and appends what was set before its import
    off = _env_after_import()
    assert off.startswith("False ") and "dirty_decay_ms:0" not in off
    assert _env_after_import(RANKSIGHT_LOW_MEMORY="1").endswith(",dirty_decay_ms:0,muzzy_decay_ms:0")
    # a policy the user set is kept
    assert _env_after_import(RANKSIGHT_LOW_MEMORY="yes", _RJEM_MALLOC_CONF="dirty_decay_ms:5").endswith(
        ",dirty_decay_ms:5"
    )


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_mmap_threshold_is_taken_by_glibc() -> None:
    assert _core.set_mmap_threshold(128 << 10) is True
