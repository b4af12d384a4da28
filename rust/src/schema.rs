//! The one declaration of what the decoder reads and writes: the arg keys it types, the trace
//! event phases, and every output table with its columns in order and their Arrow types.
//!
//! Everything else is generated from here: the key table (`KEYS`, `key_index`, the `Key` enum
//! that side-table columns name their source with), the phase codes, the column order that
//! `export` builds (it checks each table against `tables()`), and `_core.schema()` /
//! `_core.phases()`, which the Python side (`ranksight.io.kineto.SCHEMA`, `PHASES`, `TABLES`)
//! reads instead of repeating them.

use arrow_schema::DataType;
use std::sync::OnceLock;

/// How an arg value is parsed into a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    I64,
    I32,
    F64,
    /// dictionary-encoded string (string args are unescaped; other JSON values keep their text)
    Str,
    /// dictionary-encoded compact JSON text (whitespace outside strings removed)
    Json,
    /// element `k` of a `[x, y, z]` array, as i32
    Dim(usize),
}

impl Ty {
    /// The Arrow type of a column of this kind.
    pub const fn out(self) -> Out {
        match self {
            Ty::I64 => Out::I64,
            Ty::I32 | Ty::Dim(_) => Out::I32,
            Ty::F64 => Out::F64,
            Ty::Str | Ty::Json => Out::Dict,
        }
    }
}

/// Declares the arg keys: the `Key` enum (index = position), `KEYS`, `NKEYS` and `key_index`
/// (a `match`: length and byte comparisons, faster than hashing). `| "alias"` adds spellings that
/// map to the same key.
macro_rules! arg_keys {
    ($($id:ident => $name:literal $(| $alias:literal)*,)*) => {
        /// An arg key the decoder types; `key as usize` indexes `KEYS` and the per-event arg slots.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Key {
            $($id,)*
        }

        /// Arg keys the decoder types, in `Key` order.
        pub const KEYS: &[&str] = &[$($name,)*];

        /// Every `Key`, in order.
        pub const ALL_KEYS: &[Key] = &[$(Key::$id,)*];

        /// Index of an arg key (its `Key`), or None for keys the decoder does not type.
        #[inline]
        pub fn key_index(k: &str) -> Option<usize> {
            Some(match k {
                $($name $(| $alias)* => Key::$id as usize,)*
                _ => return None,
            })
        }
    };
}

arg_keys! {
    Correlation => "correlation",
    ExternalId => "External id",
    ExternalIdOld => "external id",
    Stream => "stream",
    Device => "device",
    Grid => "grid",
    Block => "block",
    RegistersPerThread => "registers per thread",
    SharedMemory => "shared memory",
    BlocksPerSm => "blocks per SM",
    WarpsPerSm => "warps per SM",
    EstOccupancy => "est. achieved occupancy %",
    TheoreticalOccupancy => "theoretical occupancy %",
    Bytes => "bytes",
    MemoryBandwidth => "memory bandwidth (GB/s)",
    Size => "size",
    Kind => "kind",
    Src => "src",
    Dst => "dst",
    InputDims => "Input Dims" | "input dims",
    InputType => "Input type" | "input type",
    KernelBackend => "kernel_backend",
    SequenceNumber => "Sequence number",
    FwdThreadId => "Fwd thread id",
    PythonId => "Python id",
    PythonParentId => "Python parent id",
    PythonModuleId => "Python module id",
    Flops => "flops",
    CollectiveName => "Collective name",
    InMsgNelems => "In msg nelems",
    OutMsgNelems => "Out msg nelems",
    Dtype => "dtype",
    GroupSize => "Group size",
    PgName => "Process Group Name",
    PgDesc => "Process Group Description",
    PgRanks => "Process Group Ranks",
    Seq => "Seq",
    Rank => "Rank",
    InSplitSize => "In split size",
    OutSplitSize => "Out split size",
    SrcRank => "Src Rank",
    DstRank => "Dst Rank",
    Addr => "Addr",
    AllocBytes => "Bytes",
    TotalAllocated => "Total Allocated",
    TotalReserved => "Total Reserved",
    DeviceType => "Device Type",
    DeviceId => "Device Id",
    CudaSyncKind => "cuda_sync_kind",
    WaitOnStream => "wait_on_stream",
    WaitOnEventCorrelation => "wait_on_cuda_event_record_corr_id",
    WaitOnEventId => "wait_on_cuda_event_id",
    Name => "name",
    Labels => "labels",
    SortIndex => "sort_index",
    KernelHash => "kernel_hash",
    ConcreteInputs => "Concrete Inputs",
    GraphId => "graph id",
    GraphNodeId => "graph node id",
    Queued => "queued",
    Context => "context",
}

pub const NKEYS: usize = KEYS.len();
// the keys an event carries are a bit set in a u64
const _: () = assert!(NKEYS <= 64);

impl Key {
    /// Position of the key in `KEYS` (its arg slot).
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Trace event phases, in code order; anything else is `?` (the last code).
pub const PHASES: &[&str] = &[
    "X", "B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "R", "c", "V", "v", "?",
];
pub const PHASE_UNKNOWN: u8 = (PHASES.len() - 1) as u8;

/// Phase code of each byte (every phase but `?` is one ASCII character).
const PHASE_OF_BYTE: [u8; 256] = {
    let mut t = [PHASE_UNKNOWN; 256];
    let mut i = 0;
    while i < PHASES.len() - 1 {
        let p = PHASES[i].as_bytes();
        assert!(p.len() == 1);
        t[p[0] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Phase code of a one-byte phase.
#[inline]
pub const fn phase_byte(c: u8) -> u8 {
    PHASE_OF_BYTE[c as usize]
}

/// Phase code of a phase string (`PHASE_UNKNOWN` for anything not in `PHASES`).
#[inline]
pub fn phase_code(p: &str) -> u8 {
    match p.as_bytes() {
        [c] => phase_byte(*c),
        _ => PHASE_UNKNOWN,
    }
}

/// Phase codes of flow events (`s`, `t`, `f`).
pub const FLOW_PHASES: [u8; 3] = [phase_byte(b's'), phase_byte(b't'), phase_byte(b'f')];

/// Arrow type of an output column; `name()` is how `_core.schema()` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Out {
    U32,
    U64,
    I32,
    I64,
    F64,
    /// dictionary<uint32, utf8>: only the strings the column uses
    Dict,
    /// dictionary<uint8, utf8> over `PHASES`
    Phase,
}

impl Out {
    pub const ALL: [Out; 7] = [Out::U32, Out::U64, Out::I32, Out::I64, Out::F64, Out::Dict, Out::Phase];

    pub const fn name(self) -> &'static str {
        match self {
            Out::U32 => "u32",
            Out::U64 => "u64",
            Out::I32 => "i32",
            Out::I64 => "i64",
            Out::F64 => "f64",
            Out::Dict => "dict",
            Out::Phase => "phase",
        }
    }

    pub fn data_type(self) -> DataType {
        let dict = |k: DataType| DataType::Dictionary(Box::new(k), Box::new(DataType::Utf8));
        match self {
            Out::U32 => DataType::UInt32,
            Out::U64 => DataType::UInt64,
            Out::I32 => DataType::Int32,
            Out::I64 => DataType::Int64,
            Out::F64 => DataType::Float64,
            Out::Dict => dict(DataType::UInt32),
            Out::Phase => dict(DataType::UInt8),
        }
    }
}

/// One column of an output table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: Out,
}

const fn col(name: &'static str, ty: Out) -> Column {
    Column { name, ty }
}

/// The event index (position in `traceEvents`) that keys every table but `spans`.
pub const ROW: Column = col("row", Out::U32);

/// Columns the event table and the flow table start with.
pub const HEAD: &[Column] = &[
    ROW,
    col("ph", Out::Phase),
    col("cat", Out::Dict),
    col("name", Out::Dict),
    col("pid", Out::I32),
    col("tid", Out::I32),
    col("ts_ns", Out::I64),
];

/// The event table's columns after `HEAD`.
pub const EVENTS_TAIL: &[Column] = &[
    col("dur_ns", Out::I64),
    col("correlation", Out::I64),
    col("external_id", Out::I64),
    col("stream", Out::I64),
    col("device", Out::I32),
];

/// Byte offset and length of every event in the (decompressed) JSON text.
pub const SPANS: &[Column] = &[col("offset", Out::U64), col("length", Out::U32)];

/// The flow table's columns after `HEAD`.
pub const FLOW_TAIL: &[Column] = &[col("flow_id", Out::I64), col("flow_bp", Out::Dict)];

/// A side-table column: its name, the arg it comes from and how it is parsed.
pub struct ColSpec {
    pub name: &'static str,
    pub key: Key,
    pub ty: Ty,
}

pub struct TableSpec {
    pub name: &'static str,
    pub cols: &'static [ColSpec],
}

macro_rules! c {
    ($n:expr, $k:ident, $t:expr) => {
        ColSpec { name: $n, key: Key::$k, ty: $t }
    };
}

/// Side tables: one row per event that carries at least one of the table's args (after `ROW`).
pub const TABLES: &[TableSpec] = &[
    TableSpec {
        name: "kernel",
        cols: &[
            c!("grid_x", Grid, Ty::Dim(0)),
            c!("grid_y", Grid, Ty::Dim(1)),
            c!("grid_z", Grid, Ty::Dim(2)),
            c!("block_x", Block, Ty::Dim(0)),
            c!("block_y", Block, Ty::Dim(1)),
            c!("block_z", Block, Ty::Dim(2)),
            c!("registers_per_thread", RegistersPerThread, Ty::I32),
            c!("shared_memory_bytes", SharedMemory, Ty::I64),
            c!("blocks_per_sm", BlocksPerSm, Ty::F64),
            c!("warps_per_sm", WarpsPerSm, Ty::F64),
            c!("est_occupancy_pct", EstOccupancy, Ty::F64),
            c!("theoretical_occupancy_pct", TheoreticalOccupancy, Ty::F64),
            c!("graph_id", GraphId, Ty::I64),
            c!("graph_node_id", GraphNodeId, Ty::I64),
            c!("queued", Queued, Ty::I64),
            c!("context", Context, Ty::I64),
        ],
    },
    TableSpec {
        name: "transfer",
        cols: &[
            c!("bytes", Bytes, Ty::I64),
            c!("mem_bw_gbps", MemoryBandwidth, Ty::F64),
            c!("size_bytes", Size, Ty::I64),
            c!("copy_kind", Kind, Ty::Str),
            c!("src", Src, Ty::Str),
            c!("dst", Dst, Ty::Str),
        ],
    },
    TableSpec {
        name: "op",
        cols: &[
            c!("input_dims", InputDims, Ty::Json),
            c!("input_type", InputType, Ty::Json),
            c!("concrete_inputs", ConcreteInputs, Ty::Json),
            c!("kernel_backend", KernelBackend, Ty::Str),
            c!("kernel_hash", KernelHash, Ty::Str),
            c!("sequence_number", SequenceNumber, Ty::I64),
            c!("fwd_thread_id", FwdThreadId, Ty::I64),
            c!("python_id", PythonId, Ty::I64),
            c!("python_parent_id", PythonParentId, Ty::I64),
            c!("python_module_id", PythonModuleId, Ty::I64),
            c!("flops", Flops, Ty::F64),
        ],
    },
    TableSpec {
        name: "collective",
        cols: &[
            c!("collective_name", CollectiveName, Ty::Str),
            c!("in_msg_nelems", InMsgNelems, Ty::I64),
            c!("out_msg_nelems", OutMsgNelems, Ty::I64),
            c!("dtype", Dtype, Ty::Str),
            c!("group_size", GroupSize, Ty::I32),
            c!("pg_name", PgName, Ty::Str),
            c!("pg_desc", PgDesc, Ty::Str),
            c!("pg_ranks", PgRanks, Ty::Json),
            c!("seq", Seq, Ty::I64),
            c!("process_rank", Rank, Ty::I64),
            c!("in_split_size", InSplitSize, Ty::Json),
            c!("out_split_size", OutSplitSize, Ty::Json),
            c!("src_rank", SrcRank, Ty::I64),
            c!("dst_rank", DstRank, Ty::I64),
        ],
    },
    TableSpec {
        name: "memory",
        cols: &[
            c!("addr", Addr, Ty::I64),
            c!("bytes", AllocBytes, Ty::I64),
            c!("total_allocated", TotalAllocated, Ty::I64),
            c!("total_reserved", TotalReserved, Ty::I64),
            c!("device_type", DeviceType, Ty::I32),
            c!("device_id", DeviceId, Ty::I32),
        ],
    },
    TableSpec {
        name: "sync",
        cols: &[
            c!("sync_kind", CudaSyncKind, Ty::Str),
            c!("wait_on_stream", WaitOnStream, Ty::I64),
            c!("wait_on_event_correlation", WaitOnEventCorrelation, Ty::I64),
            c!("wait_on_event_id", WaitOnEventId, Ty::I64),
        ],
    },
    TableSpec {
        name: "meta",
        cols: &[c!("label", Name, Ty::Str), c!("labels", Labels, Ty::Str), c!("sort_index", SortIndex, Ty::I64)],
    },
];

/// Bit mask of the arg keys of side table `ti` (an event belongs to the table when it carries
/// any of them).
#[inline]
pub fn table_mask(ti: usize) -> u64 {
    static MASKS: OnceLock<Vec<u64>> = OnceLock::new();
    MASKS.get_or_init(|| TABLES.iter().map(|t| t.cols.iter().fold(0u64, |m, c| m | (1u64 << c.key.index()))).collect())[ti]
}

/// One output table: its name and its columns in order.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub columns: Vec<Column>,
}

/// Every table the decoder outputs, in output order: `events`, `spans`, the side tables of
/// `TABLES`, `flow`.
pub fn tables() -> &'static [Table] {
    static ALL: OnceLock<Vec<Table>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v = vec![
            Table { name: "events", columns: [HEAD, EVENTS_TAIL].concat() },
            Table { name: "spans", columns: SPANS.to_vec() },
        ];
        for t in TABLES {
            let mut columns = vec![ROW];
            columns.extend(t.cols.iter().map(|c| col(c.name, c.ty.out())));
            v.push(Table { name: t.name, columns });
        }
        v.push(Table { name: "flow", columns: [HEAD, FLOW_TAIL].concat() });
        v
    })
}

/// The columns of output table `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    tables().iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_table_is_consistent() {
        assert_eq!(KEYS.len(), NKEYS);
        assert_eq!(ALL_KEYS.len(), NKEYS);
        for (i, k) in KEYS.iter().enumerate() {
            assert_eq!(key_index(k), Some(i), "{k}");
            assert_eq!(ALL_KEYS[i].index(), i);
        }
        assert_eq!(key_index("input dims"), Some(Key::InputDims.index()));
        assert_eq!(key_index("Input type"), Some(Key::InputType.index()));
        assert_eq!(key_index("nope"), None);
        // the original hand-numbered table, kept as a pin
        assert_eq!(Key::Grid.index(), 5);
        assert_eq!(Key::InputDims.index(), 19);
        assert_eq!(Key::AllocBytes.index(), 43);
        assert_eq!(Key::Context.index(), 60);
        assert_eq!(NKEYS, 61);
    }

    #[test]
    fn phases() {
        for (i, p) in PHASES.iter().enumerate().take(PHASES.len() - 1) {
            assert_eq!(phase_code(p), i as u8, "{p}");
        }
        assert_eq!(phase_code("?"), PHASE_UNKNOWN);
        assert_eq!(phase_code("XX"), PHASE_UNKNOWN);
        assert_eq!(phase_code(""), PHASE_UNKNOWN);
        assert_eq!(phase_code("é"), PHASE_UNKNOWN);
        assert_eq!(FLOW_PHASES, [9, 10, 11]);
        assert_eq!(PHASES[PHASE_UNKNOWN as usize], "?");
    }

    #[test]
    fn tables_in_output_order_with_unique_columns() {
        let names: Vec<&str> = tables().iter().map(|t| t.name).collect();
        assert_eq!(names, ["events", "spans", "kernel", "transfer", "op", "collective", "memory", "sync", "meta", "flow"]);
        for t in tables() {
            let mut seen = std::collections::HashSet::new();
            for c in &t.columns {
                assert!(seen.insert(c.name), "{}.{} twice", t.name, c.name);
            }
            if t.name != "spans" {
                assert_eq!(t.columns[0], ROW, "{}", t.name);
            }
        }
        let ev: Vec<&str> = table("events").unwrap().columns.iter().map(|c| c.name).collect();
        assert_eq!(
            ev,
            ["row", "ph", "cat", "name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "external_id", "stream", "device"]
        );
        assert!(table("nope").is_none());
    }

    #[test]
    fn every_side_key_belongs_to_one_table() {
        let core = [Key::Correlation, Key::ExternalId, Key::ExternalIdOld, Key::Stream, Key::Device];
        for &k in ALL_KEYS {
            let owners = TABLES.iter().filter(|t| t.cols.iter().any(|c| c.key == k)).count();
            if core.contains(&k) {
                assert_eq!(owners, 0, "{k:?}");
            } else {
                assert_eq!(owners, 1, "{k:?} is in {owners} tables");
            }
        }
        assert_eq!(table_mask(0) & (1 << Key::Grid.index()), 1 << Key::Grid.index());
    }
}
