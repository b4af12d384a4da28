"""Data shipped with ranksight (the built-in example)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["example_path"]


def example_path(name: str = "dlrm") -> Path:
    """Directory of a built-in example (``dlrm``: 8 ranks of a real DLRM training step)."""
    return Path(str(files("ranksight.data") / "examples" / name))  # Traversable.joinpath takes one name on 3.10
