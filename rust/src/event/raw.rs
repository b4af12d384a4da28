//! The validating path: an event's typed fields through serde_json (borrowed raw values, args
//! picked by `key_index`), for events the fast path does not take.

use super::fields::Fields;
use crate::schema::{key_index, NKEYS};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;

#[derive(Deserialize)]
pub struct RawEvent<'a> {
    #[serde(borrow, default)]
    ph: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cat: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pid: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tid: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ts: Option<&'a RawValue>,
    #[serde(borrow, default)]
    dur: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    bp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    args: Option<Args<'a>>,
}

struct Args<'a> {
    v: [Option<&'a RawValue>; NKEYS],
}

struct KeyIdx(Option<usize>);

impl<'de> Deserialize<'de> for KeyIdx {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyIdx;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<KeyIdx, E> {
                Ok(KeyIdx(key_index(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Args<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an args object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Args<'a>, M::Error> {
                let mut a = Args { v: [None; NKEYS] };
                while let Some(KeyIdx(k)) = m.next_key::<KeyIdx>()? {
                    match k {
                        Some(i) => a.v[i] = Some(m.next_value::<&'de RawValue>()?),
                        None => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(a)
            }
            // args that are not an object are ignored
            fn visit_seq<S: de::SeqAccess<'de>>(self, mut s: S) -> Result<Args<'a>, S::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Args<'a>, E> {
                Ok(Args { v: [None; NKEYS] })
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<'a> Fields<'a> {
    /// The fields of an event parsed by serde_json.
    pub fn from_serde(ev: &RawEvent<'a>) -> Self {
        let b = |r: Option<&'a RawValue>| r.map(|v| v.get().as_bytes());
        let mut f = Fields::new();
        f.ph = b(ev.ph);
        f.cat = b(ev.cat);
        f.name = b(ev.name);
        f.pid = b(ev.pid);
        f.tid = b(ev.tid);
        f.ts = b(ev.ts);
        f.dur = b(ev.dur);
        f.id = b(ev.id);
        f.bp = b(ev.bp);
        if let Some(a) = &ev.args {
            f.has_args = true;
            for (i, v) in a.v.iter().enumerate() {
                if let Some(v) = v {
                    f.args[i] = Some(v.get().as_bytes());
                    f.present |= 1u64 << i;
                }
            }
        }
        f
    }
}
