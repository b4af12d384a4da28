//! Column builders and per-part string interning (the tables' schema is in `schema`).

use crate::schema::Ty;
use rustc_hash::FxHashMap;

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
    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
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
    bytes: usize,
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
        self.bytes += s.len();
        c
    }
    /// Bytes of the distinct strings.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    pub fn strings(&self) -> &[Box<str>] {
        &self.list
    }
    pub fn len(&self) -> usize {
        self.list.len()
    }
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}
