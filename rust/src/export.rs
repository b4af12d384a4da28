//! Hand the decoded columns to Python without copying them: Arrow arrays exported through the
//! Arrow C data interface (PyCapsule protocol, `__arrow_c_array__`).

use crate::columns::{Col, Interner, Vals, PHASES, TABLES};
use crate::event::{Columns, Head};
use arrow_array::types::{UInt32Type, UInt8Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, StringArray, StructArray, UInt32Array,
    UInt64Array, UInt8Array,
};
use arrow_buffer::{NullBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::{Field, Fields};
use std::sync::Arc;

fn nulls(valid: Vec<bool>, count: usize) -> Option<NullBuffer> {
    if count == 0 {
        None
    } else {
        Some(NullBuffer::from(valid))
    }
}

/// Dictionary array whose values are only the strings this column uses.
fn dict_column(codes: Vec<u32>, valid: Option<NullBuffer>, strings: &[Box<str>]) -> ArrayRef {
    let mut map = vec![u32::MAX; strings.len()];
    let mut used: Vec<&str> = Vec::new();
    let mut out = codes;
    for (i, c) in out.iter_mut().enumerate() {
        if let Some(v) = &valid {
            if v.is_null(i) {
                *c = 0;
                continue;
            }
        }
        let g = *c as usize;
        if map[g] == u32::MAX {
            map[g] = used.len() as u32;
            used.push(&strings[g]);
        }
        *c = map[g];
    }
    if used.is_empty() {
        used.push("");
    }
    let keys = UInt32Array::new(ScalarBuffer::from(out), valid);
    let values: ArrayRef = Arc::new(StringArray::from(used));
    Arc::new(DictionaryArray::<UInt32Type>::try_new(keys, values).expect("valid dictionary"))
}

fn col_array(col: Col, strings: &[Box<str>]) -> ArrayRef {
    let nb = nulls(col.valid, col.nulls);
    match col.vals {
        Vals::I64(v) => Arc::new(Int64Array::new(ScalarBuffer::from(v), nb)),
        Vals::I32(v) => Arc::new(Int32Array::new(ScalarBuffer::from(v), nb)),
        Vals::F64(v) => Arc::new(Float64Array::new(ScalarBuffer::from(v), nb)),
        Vals::Str(v) => dict_column(v, nb, strings),
    }
}

fn batch(cols: Vec<(&str, ArrayRef)>) -> ArrayData {
    let fields: Fields = cols.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), a.null_count() > 0 || a.is_nullable())).collect::<Vec<_>>().into();
    let arrays: Vec<ArrayRef> = cols.into_iter().map(|(_, a)| a).collect();
    StructArray::new(fields, arrays, None).into_data()
}

/// Build every table. Returns (name, struct array) pairs.
pub fn tables(cols: Columns) -> (Vec<(String, ArrayData)>, Vec<(i64, String)>, usize) {
    let Columns {
        strings,
        n: _,
        head,
        dur,
        correlation,
        external_id,
        stream,
        device,
        offset,
        len,
        tables,
        flows,
        id_names,
        ..
    } = cols;
    let strings: &Interner = &strings;
    let s = strings.strings();
    let nstrings = strings.len();
    let mut out = Vec::new();
    let phases = |ph: Vec<u8>| -> ArrayRef {
        let names: ArrayRef = Arc::new(StringArray::from(PHASES.to_vec()));
        Arc::new(DictionaryArray::<UInt8Type>::try_new(UInt8Array::new(ScalarBuffer::from(ph), None), names).expect("phases"))
    };
    // the columns events and flows share: row, ph, cat, name, pid, tid, ts_ns
    let head_columns = |h: Head| -> Vec<(&str, ArrayRef)> {
        vec![
            ("row", Arc::new(UInt32Array::new(ScalarBuffer::from(h.rows), None))),
            ("ph", phases(h.ph)),
            ("cat", dict_column(h.cat, None, s)),
            ("name", dict_column(h.name, None, s)),
            ("pid", Arc::new(Int32Array::new(ScalarBuffer::from(h.pid), None))),
            ("tid", Arc::new(Int32Array::new(ScalarBuffer::from(h.tid), None))),
            ("ts_ns", col_array(h.ts, s)),
        ]
    };
    let mut core = head_columns(head);
    core.extend([
        ("dur_ns", col_array(dur, s)),
        ("correlation", col_array(correlation, s)),
        ("external_id", col_array(external_id, s)),
        ("stream", col_array(stream, s)),
        ("device", col_array(device, s)),
    ]);
    out.push(("events".to_string(), batch(core)));
    out.push((
        "spans".to_string(),
        batch(vec![
            ("offset", Arc::new(UInt64Array::new(ScalarBuffer::from(offset), None))),
            ("length", Arc::new(UInt32Array::new(ScalarBuffer::from(len), None))),
        ]),
    ));
    for (spec, (rows, tcols)) in TABLES.iter().zip(tables.into_iter()) {
        let mut v: Vec<(&str, ArrayRef)> = vec![("row", Arc::new(UInt32Array::new(ScalarBuffer::from(rows), None)))];
        for (cs, c) in spec.cols.iter().zip(tcols.into_iter()) {
            v.push((cs.name, col_array(c, s)));
        }
        out.push((spec.name.to_string(), batch(v)));
    }
    let mut flow = head_columns(flows.head);
    flow.extend([("flow_id", col_array(flows.id, s)), ("flow_bp", col_array(flows.bp, s))]);
    out.push(("flow".to_string(), batch(flow)));
    (out, id_names, nstrings)
}
