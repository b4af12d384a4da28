//! Column builders, per-part string interning and the schema of the decoded tables.

use rustc_hash::FxHashMap;

/// Value type of a column.
#[derive(Clone, Copy, Debug, PartialEq)]
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

#[derive(Clone, Debug)]
pub enum Vals {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    Str(Vec<u32>),
}

#[derive(Clone, Debug)]
pub struct Col {
    pub vals: Vals,
    pub valid: Vec<bool>,
    pub nulls: usize,
}

impl Col {
    pub fn new(ty: Ty) -> Self {
        let vals = match ty {
            Ty::I64 => Vals::I64(Vec::new()),
            Ty::I32 | Ty::Dim(_) => Vals::I32(Vec::new()),
            Ty::F64 => Vals::F64(Vec::new()),
            Ty::Str | Ty::Json => Vals::Str(Vec::new()),
        };
        Col { vals, valid: Vec::new(), nulls: 0 }
    }
    #[inline]
    pub fn push_i64(&mut self, v: Option<i64>) {
        if let Vals::I64(x) = &mut self.vals {
            x.push(v.unwrap_or(0));
        }
        self.mark(v.is_some());
    }
    #[inline]
    pub fn push_i32(&mut self, v: Option<i32>) {
        if let Vals::I32(x) = &mut self.vals {
            x.push(v.unwrap_or(0));
        }
        self.mark(v.is_some());
    }
    #[inline]
    pub fn push_f64(&mut self, v: Option<f64>) {
        if let Vals::F64(x) = &mut self.vals {
            x.push(v.unwrap_or(0.0));
        }
        self.mark(v.is_some());
    }
    #[inline]
    pub fn push_str(&mut self, v: Option<u32>) {
        if let Vals::Str(x) = &mut self.vals {
            x.push(v.unwrap_or(0));
        }
        self.mark(v.is_some());
    }
    #[inline]
    fn mark(&mut self, ok: bool) {
        self.valid.push(ok);
        if !ok {
            self.nulls += 1;
        }
    }
    pub fn len(&self) -> usize {
        self.valid.len()
    }
    /// Append another column, remapping dictionary codes through `remap`.
    pub fn extend_from(&mut self, other: &Col, remap: &[u32]) {
        match (&mut self.vals, &other.vals) {
            (Vals::I64(a), Vals::I64(b)) => a.extend_from_slice(b),
            (Vals::I32(a), Vals::I32(b)) => a.extend_from_slice(b),
            (Vals::F64(a), Vals::F64(b)) => a.extend_from_slice(b),
            (Vals::Str(a), Vals::Str(b)) => a.extend(b.iter().map(|&c| remap[c as usize])),
            _ => unreachable!("column type mismatch"),
        }
        self.valid.extend_from_slice(&other.valid);
        self.nulls += other.nulls;
    }
}

/// Interns strings to dense u32 codes.
#[derive(Default)]
pub struct Interner {
    map: FxHashMap<Box<str>, u32>,
    list: Vec<Box<str>>,
}

impl Interner {
    #[inline]
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&c) = self.map.get(s) {
            return c;
        }
        let c = self.list.len() as u32;
        let b: Box<str> = s.into();
        self.map.insert(b.clone(), c);
        self.list.push(b);
        c
    }
    pub fn strings(&self) -> &[Box<str>] {
        &self.list
    }
    pub fn len(&self) -> usize {
        self.list.len()
    }
}

/// Arg keys the decoder types. Index = position in this list.
pub const KEYS: &[&str] = &[
    "correlation",                       // 0
    "External id",                       // 1
    "external id",                       // 2
    "stream",                            // 3
    "device",                            // 4
    "grid",                              // 5
    "block",                             // 6
    "registers per thread",              // 7
    "shared memory",                     // 8
    "blocks per SM",                     // 9
    "warps per SM",                      // 10
    "est. achieved occupancy %",         // 11
    "theoretical occupancy %",           // 12
    "bytes",                             // 13
    "memory bandwidth (GB/s)",           // 14
    "size",                              // 15
    "kind",                              // 16
    "src",                               // 17
    "dst",                               // 18
    "Input Dims",                        // 19
    "Input type",                        // 20
    "kernel_backend",                    // 21
    "Sequence number",                   // 22
    "Fwd thread id",                     // 23
    "Python id",                         // 24
    "Python parent id",                  // 25
    "Python module id",                  // 26
    "flops",                             // 27
    "Collective name",                   // 28
    "In msg nelems",                     // 29
    "Out msg nelems",                    // 30
    "dtype",                             // 31
    "Group size",                        // 32
    "Process Group Name",                // 33
    "Process Group Description",         // 34
    "Process Group Ranks",               // 35
    "Seq",                               // 36
    "Rank",                              // 37
    "In split size",                     // 38
    "Out split size",                    // 39
    "Src Rank",                          // 40
    "Dst Rank",                          // 41
    "Addr",                              // 42
    "Bytes",                             // 43
    "Total Allocated",                   // 44
    "Total Reserved",                    // 45
    "Device Type",                       // 46
    "Device Id",                         // 47
    "cuda_sync_kind",                    // 48
    "wait_on_stream",                    // 49
    "wait_on_cuda_event_record_corr_id", // 50
    "wait_on_cuda_event_id",             // 51
    "name",                              // 52
    "labels",                            // 53
    "sort_index",                        // 54
    "kernel_hash",                       // 55
    "Concrete Inputs",                   // 56
    "graph id",                          // 57
    "graph node id",                     // 58
    "queued",                            // 59
    "context",                           // 60
];
pub const NKEYS: usize = 61;

pub const K_CORRELATION: usize = 0;
pub const K_EXTERNAL_ID: usize = 1;
pub const K_EXTERNAL_ID_OLD: usize = 2;
pub const K_STREAM: usize = 3;
pub const K_DEVICE: usize = 4;

#[inline]
pub fn key_index(k: &str) -> Option<usize> {
    // a match compiles to length + byte comparisons; faster than hashing
    Some(match k {
        "correlation" => 0,
        "External id" => 1,
        "external id" => 2,
        "stream" => 3,
        "device" => 4,
        "grid" => 5,
        "block" => 6,
        "registers per thread" => 7,
        "shared memory" => 8,
        "blocks per SM" => 9,
        "warps per SM" => 10,
        "est. achieved occupancy %" => 11,
        "theoretical occupancy %" => 12,
        "bytes" => 13,
        "memory bandwidth (GB/s)" => 14,
        "size" => 15,
        "kind" => 16,
        "src" => 17,
        "dst" => 18,
        "Input Dims" | "input dims" => 19,
        "Input type" | "input type" => 20,
        "kernel_backend" => 21,
        "Sequence number" => 22,
        "Fwd thread id" => 23,
        "Python id" => 24,
        "Python parent id" => 25,
        "Python module id" => 26,
        "flops" => 27,
        "Collective name" => 28,
        "In msg nelems" => 29,
        "Out msg nelems" => 30,
        "dtype" => 31,
        "Group size" => 32,
        "Process Group Name" => 33,
        "Process Group Description" => 34,
        "Process Group Ranks" => 35,
        "Seq" => 36,
        "Rank" => 37,
        "In split size" => 38,
        "Out split size" => 39,
        "Src Rank" => 40,
        "Dst Rank" => 41,
        "Addr" => 42,
        "Bytes" => 43,
        "Total Allocated" => 44,
        "Total Reserved" => 45,
        "Device Type" => 46,
        "Device Id" => 47,
        "cuda_sync_kind" => 48,
        "wait_on_stream" => 49,
        "wait_on_cuda_event_record_corr_id" => 50,
        "wait_on_cuda_event_id" => 51,
        "name" => 52,
        "labels" => 53,
        "sort_index" => 54,
        "kernel_hash" => 55,
        "Concrete Inputs" => 56,
        "graph id" => 57,
        "graph node id" => 58,
        "queued" => 59,
        "context" => 60,
        _ => return None,
    })
}

pub struct ColSpec {
    pub name: &'static str,
    pub key: usize,
    pub ty: Ty,
}

pub struct TableSpec {
    pub name: &'static str,
    pub cols: &'static [ColSpec],
}

macro_rules! c {
    ($n:expr, $k:expr, $t:expr) => {
        ColSpec { name: $n, key: $k, ty: $t }
    };
}

/// Side tables: one row per event that carries at least one of the table's args.
pub const TABLES: &[TableSpec] = &[
    TableSpec {
        name: "kernel",
        cols: &[
            c!("grid_x", 5, Ty::Dim(0)),
            c!("grid_y", 5, Ty::Dim(1)),
            c!("grid_z", 5, Ty::Dim(2)),
            c!("block_x", 6, Ty::Dim(0)),
            c!("block_y", 6, Ty::Dim(1)),
            c!("block_z", 6, Ty::Dim(2)),
            c!("registers_per_thread", 7, Ty::I32),
            c!("shared_memory_bytes", 8, Ty::I64),
            c!("blocks_per_sm", 9, Ty::F64),
            c!("warps_per_sm", 10, Ty::F64),
            c!("est_occupancy_pct", 11, Ty::F64),
            c!("theoretical_occupancy_pct", 12, Ty::F64),
            c!("graph_id", 57, Ty::I64),
            c!("graph_node_id", 58, Ty::I64),
            c!("queued", 59, Ty::I64),
            c!("context", 60, Ty::I64),
        ],
    },
    TableSpec {
        name: "transfer",
        cols: &[
            c!("bytes", 13, Ty::I64),
            c!("mem_bw_gbps", 14, Ty::F64),
            c!("size_bytes", 15, Ty::I64),
            c!("copy_kind", 16, Ty::Str),
            c!("src", 17, Ty::Str),
            c!("dst", 18, Ty::Str),
        ],
    },
    TableSpec {
        name: "op",
        cols: &[
            c!("input_dims", 19, Ty::Json),
            c!("input_type", 20, Ty::Json),
            c!("concrete_inputs", 56, Ty::Json),
            c!("kernel_backend", 21, Ty::Str),
            c!("kernel_hash", 55, Ty::Str),
            c!("sequence_number", 22, Ty::I64),
            c!("fwd_thread_id", 23, Ty::I64),
            c!("python_id", 24, Ty::I64),
            c!("python_parent_id", 25, Ty::I64),
            c!("python_module_id", 26, Ty::I64),
            c!("flops", 27, Ty::F64),
        ],
    },
    TableSpec {
        name: "collective",
        cols: &[
            c!("collective_name", 28, Ty::Str),
            c!("in_msg_nelems", 29, Ty::I64),
            c!("out_msg_nelems", 30, Ty::I64),
            c!("dtype", 31, Ty::Str),
            c!("group_size", 32, Ty::I32),
            c!("pg_name", 33, Ty::Str),
            c!("pg_desc", 34, Ty::Str),
            c!("pg_ranks", 35, Ty::Json),
            c!("seq", 36, Ty::I64),
            c!("process_rank", 37, Ty::I64),
            c!("in_split_size", 38, Ty::Json),
            c!("out_split_size", 39, Ty::Json),
            c!("src_rank", 40, Ty::I64),
            c!("dst_rank", 41, Ty::I64),
        ],
    },
    TableSpec {
        name: "memory",
        cols: &[
            c!("addr", 42, Ty::I64),
            c!("bytes", 43, Ty::I64),
            c!("total_allocated", 44, Ty::I64),
            c!("total_reserved", 45, Ty::I64),
            c!("device_type", 46, Ty::I32),
            c!("device_id", 47, Ty::I32),
        ],
    },
    TableSpec {
        name: "sync",
        cols: &[
            c!("sync_kind", 48, Ty::Str),
            c!("wait_on_stream", 49, Ty::I64),
            c!("wait_on_event_correlation", 50, Ty::I64),
            c!("wait_on_event_id", 51, Ty::I64),
        ],
    },
    TableSpec {
        name: "meta",
        cols: &[c!("label", 52, Ty::Str), c!("labels", 53, Ty::Str), c!("sort_index", 54, Ty::I64)],
    },
];

/// Which table (index into TABLES) each key belongs to; None for core keys.
pub fn key_table(k: usize) -> Option<usize> {
    for (ti, t) in TABLES.iter().enumerate() {
        if t.cols.iter().any(|c| c.key == k) {
            return Some(ti);
        }
    }
    None
}

pub const PHASES: &[&str] = &[
    "X", "B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "R", "c", "V", "v", "?",
];
pub const PHASE_UNKNOWN: u8 = 21;

#[inline]
pub fn phase_code(p: &str) -> u8 {
    match p {
        "X" => 0,
        "B" => 1,
        "E" => 2,
        "i" => 3,
        "I" => 4,
        "C" => 5,
        "b" => 6,
        "n" => 7,
        "e" => 8,
        "s" => 9,
        "t" => 10,
        "f" => 11,
        "P" => 12,
        "O" => 13,
        "N" => 14,
        "D" => 15,
        "M" => 16,
        "R" => 17,
        "c" => 18,
        "V" => 19,
        "v" => 20,
        _ => PHASE_UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn keys_consistent() {
        assert_eq!(KEYS.len(), NKEYS);
        for (i, k) in KEYS.iter().enumerate() {
            assert_eq!(key_index(k), Some(i), "{k}");
        }
    }
}
