"""The decoder's output schema is declared once, in the Rust core (rust/src/schema.rs), and read
by Python through ``_core.schema()`` / ``_core.phases()``: both sides agree, and every decoded
table has exactly the declared columns, in the declared order, with the declared types."""

from __future__ import annotations

import polars as pl

from ranksight import _core
from ranksight.io import kineto
from ranksight.io.kineto import PHASES, SCHEMA, TABLES, decode, polars_schema

#: The polars type each schema type name imports as (no pyarrow: polars reads the core's Arrow
#: arrays through the PyCapsule interface; dictionary columns become categoricals).
ARROW = {
    "u32": pl.UInt32,
    "u64": pl.UInt64,
    "i32": pl.Int32,
    "i64": pl.Int64,
    "f64": pl.Float64,
    "dict": pl.Categorical,
    "phase": pl.Categorical,
}

#: An event carrying at least one arg of every side table, a flow event, an instant.
EVENTS = [
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 1.5,
        "dur": 2,
        "args": {
            "correlation": 5,
            "grid": [1, 2, 3],
            "bytes": 8,
            "Input Dims": [[1, 2]],
            "Collective name": "ar",
            "Addr": 1,
            "cuda_sync_kind": "x",
            "name": "n",
        },
    },
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 1.5, "bp": "e"},
    {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": 3,
        "args": {"Addr": 2, "Bytes": 4, "Device Type": 1},
    },
]


def test_python_reads_the_rust_declaration():
    declared = _core.schema()
    assert [t for t, _ in declared] == list(SCHEMA)
    assert list(SCHEMA)[:2] == ["events", "spans"]
    assert tuple(t for t, _ in declared[2:]) == TABLES
    assert TABLES == ("kernel", "transfer", "op", "collective", "memory", "sync", "meta", "flow")
    for table, columns in declared:
        assert list(SCHEMA[table].items()) == columns, table
        assert {ty for _, ty in columns} <= set(ARROW), table
    assert _core.phases() == PHASES
    assert PHASES[-1] == "?" and len(set(PHASES)) == len(PHASES)
    assert pl.Enum(PHASES) == kineto.PHASE_DTYPE


def test_decoded_columns_follow_the_declared_order_and_types(make_trace):
    path = str(make_trace(EVENTS))
    raw = _core.decode_file(path)
    assert raw.table_names() == list(SCHEMA)
    for table, columns in SCHEMA.items():
        assert raw.column_names(table) == list(columns), table
        for i, (name, ty) in enumerate(columns.items()):
            arr = pl.Series(raw.column(table, i))
            assert arr.dtype == ARROW[ty], f"{table}.{name}: {arr.dtype}, declared {ty}"
    # the imported tables: the declared columns in order, with the declared polars types
    d = decode(path)
    assert d.events.schema == pl.Schema(polars_schema("events"))
    assert d.spans.schema == pl.Schema(polars_schema("spans"))
    for table in TABLES:
        assert d.tables[table].schema == pl.Schema(polars_schema(table)), table
    assert d.tables["flow"]["ph"].cast(pl.String).to_list() == ["f"]
    assert d.events["ph"].cast(pl.String).to_list() == ["X", "i"]
    for table in ("kernel", "transfer", "op", "collective", "sync", "meta"):
        assert d.tables[table]["row"].to_list() == [0], table
    assert d.tables["memory"]["row"].to_list() == [0, 2]


def test_nsys_side_tables_match_the_declaration():
    from ranksight.io.nsys import SIDE_SCHEMAS

    assert list(SIDE_SCHEMAS) == list(TABLES)
    for table, schema in SIDE_SCHEMAS.items():
        assert dict(schema) == polars_schema(table), table
