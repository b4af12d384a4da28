//! Parser comparison: sonic-rs on the decoder's event spans (`cargo run --release --example
//! sonic -- FILE`, an uncompressed trace). sonic-rs is a dev-dependency for this example only.
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use sonic_rs::LazyValue;
use std::fmt;
use std::time::Instant;

/// The typed fields of an event, as sonic-rs lazy values (only parsed, never read).
#[derive(Deserialize)]
#[allow(dead_code)]
struct Ev<'a> {
    #[serde(borrow, default)]
    ph: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    cat: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    name: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    pid: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    tid: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    ts: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    dur: Option<LazyValue<'a>>,
    #[serde(borrow, default)]
    args: Option<Args<'a>>,
}

#[allow(dead_code)]
struct Args<'a> {
    v: Vec<(usize, LazyValue<'a>)>,
}

struct Key(Option<usize>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(Key(_core::schema::key_index(s)))
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
                let mut a = Args { v: Vec::new() };
                while let Some(Key(k)) = m.next_key::<Key>()? {
                    match k {
                        Some(i) => a.v.push((i, m.next_value::<LazyValue<'de>>()?)),
                        None => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(a)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: sonic FILE");
    let data = std::fs::read(&path).unwrap();
    let mut s = _core::scan::Scanner::new();
    let mut ev = Vec::new();
    let mut meta = Vec::new();
    s.scan(&data, 0, true, &mut ev, &mut meta).ok();
    let mb = data.len() as f64 / 1e6;
    let t = Instant::now();
    let ok = ev.iter().filter(|&&(a, b)| sonic_rs::from_slice::<Ev>(&data[a..b]).is_ok()).count();
    let tj = t.elapsed().as_secs_f64();
    println!("sonic struct: {} ok {:.3}s = {:.0} MB/s", ok, tj, mb / tj);
    let t = Instant::now();
    let ok = ev.iter().filter(|&&(a, b)| sonic_rs::from_slice::<IgnoredAny>(&data[a..b]).is_ok()).count();
    let tj = t.elapsed().as_secs_f64();
    println!("sonic ignore: {} ok {:.3}s = {:.0} MB/s", ok, tj, mb / tj);
}
