//! Hand the decoded columns to Python without copying them: Arrow arrays exported through the
//! Arrow C data interface (PyCapsule protocol, `__arrow_c_array__`).

use crate::columns::{Col, Interner, Vals};
use crate::event::{Columns, Head};
use crate::schema::{self, PHASES, TABLES};
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

/// Table `name` as a struct array, its columns in the order `schema::tables()` declares; `cols`
/// may come in any order. A column missing, extra or of another type than declared is a bug
/// here: it panics (an internal error in Python), and the schema tests catch it.
fn batch(name: &str, mut cols: Vec<(&str, ArrayRef)>) -> ArrayData {
    let spec = schema::table(name).unwrap_or_else(|| panic!("table {name} is not in the schema"));
    assert_eq!(cols.len(), spec.columns.len(), "table {name}: {} columns built, {} declared", cols.len(), spec.columns.len());
    let mut fields = Vec::with_capacity(cols.len());
    let mut arrays = Vec::with_capacity(cols.len());
    for c in &spec.columns {
        let k = cols.iter().position(|(n, _)| *n == c.name).unwrap_or_else(|| panic!("table {name}: no column {}", c.name));
        let (_, a) = cols.swap_remove(k);
        assert_eq!(a.data_type(), &c.ty.data_type(), "table {name}: column {} is not {}", c.name, c.ty.name());
        fields.push(Field::new(c.name, a.data_type().clone(), a.null_count() > 0 || a.is_nullable()));
        arrays.push(a);
    }
    StructArray::new(Fields::from(fields), arrays, None).into_data()
}

/// (table name, struct array) pairs, in `schema::tables()` order.
pub type NamedTables = Vec<(String, ArrayData)>;

/// Build every table. Returns the tables, the synthetic ids of string pids/tids with their
/// strings, and the number of distinct strings.
pub fn tables(cols: Columns) -> (NamedTables, Vec<(i64, String)>, usize) {
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
            (schema::ROW.name, Arc::new(UInt32Array::new(ScalarBuffer::from(h.rows), None))),
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
    out.push(("events".to_string(), batch("events", core)));
    out.push((
        "spans".to_string(),
        batch(
            "spans",
            vec![
                ("offset", Arc::new(UInt64Array::new(ScalarBuffer::from(offset), None))),
                ("length", Arc::new(UInt32Array::new(ScalarBuffer::from(len), None))),
            ],
        ),
    ));
    for (spec, (rows, tcols)) in TABLES.iter().zip(tables) {
        let mut v: Vec<(&str, ArrayRef)> = vec![(schema::ROW.name, Arc::new(UInt32Array::new(ScalarBuffer::from(rows), None)))];
        for (cs, c) in spec.cols.iter().zip(tcols) {
            v.push((cs.name, col_array(c, s)));
        }
        out.push((spec.name.to_string(), batch(spec.name, v)));
    }
    let mut flow = head_columns(flows.head);
    flow.extend([("flow_id", col_array(flows.id, s)), ("flow_bp", col_array(flows.bp, s))]);
    out.push(("flow".to_string(), batch("flow", flow)));
    (out, id_names, nstrings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_part;
    use crate::schema;

    #[test]
    fn tables_follow_the_schema() {
        let buf = br#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"correlation":5,"grid":[1,2,3],"bytes":8,"Input Dims":[[1]],"Collective name":"ar","Addr":1,"cuda_sync_kind":"x","name":"n"}}{"ph":"s","id":1,"ts":1}"#;
        let mut cols = Columns::new();
        cols.append(&parse_part(buf, &[(0, buf.len() - 24), (buf.len() - 24, buf.len())], 0));
        let (tables, _, _) = tables(cols);
        let names: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
        let declared: Vec<&str> = schema::tables().iter().map(|t| t.name).collect();
        assert_eq!(names, declared);
        for ((name, data), spec) in tables.iter().zip(schema::tables()) {
            let arrow_schema::DataType::Struct(fields) = data.data_type() else { panic!("{name} is not a struct") };
            let got: Vec<(&str, &arrow_schema::DataType)> = fields.iter().map(|f| (f.name().as_str(), f.data_type())).collect();
            let want: Vec<(&str, arrow_schema::DataType)> = spec.columns.iter().map(|c| (c.name, c.ty.data_type())).collect();
            assert_eq!(got.len(), want.len(), "{name}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!((g.0, g.1), (w.0, &w.1), "{name}");
            }
            // every event has a span; the one X event carries one arg of each side table
            assert_eq!(data.len(), if *name == "spans" { 2 } else { 1 }, "{name}");
        }
    }

    fn spans_columns() -> (ArrayRef, ArrayRef) {
        (Arc::new(UInt64Array::from(vec![1u64])), Arc::new(UInt32Array::from(vec![1u32])))
    }

    #[test]
    fn columns_come_out_in_schema_order() {
        let (off, len) = spans_columns();
        let d = batch("spans", vec![("length", len), ("offset", off)]);
        let arrow_schema::DataType::Struct(fields) = d.data_type() else { panic!() };
        assert_eq!(fields.iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), ["offset", "length"]);
    }

    #[test]
    #[should_panic(expected = "no column offset")]
    fn a_column_the_schema_lacks_is_a_bug() {
        let (_, len) = spans_columns();
        batch("spans", vec![("length", len.clone()), ("offsets", len)]);
    }

    #[test]
    #[should_panic(expected = "column length is not u32")]
    fn a_column_of_another_type_is_a_bug() {
        let (off, _) = spans_columns();
        batch("spans", vec![("length", off.clone()), ("offset", off)]);
    }
}
