"""Readers: turn files into columns. Nothing here knows about analyses."""

from ranksight.io.discovery import TraceFile, discover
from ranksight.io.kineto import DecodedTrace, decode, read_header

__all__ = ["TraceFile", "discover", "DecodedTrace", "decode", "read_header"]
