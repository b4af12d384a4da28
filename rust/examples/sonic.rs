use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use sonic_rs::LazyValue;
use std::fmt;
use std::time::Instant;

#[derive(Deserialize)]
#[allow(dead_code)]
struct Ev<'a> {
    #[serde(borrow, default)] ph: Option<LazyValue<'a>>,
    #[serde(borrow, default)] cat: Option<LazyValue<'a>>,
    #[serde(borrow, default)] name: Option<LazyValue<'a>>,
    #[serde(borrow, default)] pid: Option<LazyValue<'a>>,
    #[serde(borrow, default)] tid: Option<LazyValue<'a>>,
    #[serde(borrow, default)] ts: Option<LazyValue<'a>>,
    #[serde(borrow, default)] dur: Option<LazyValue<'a>>,
    #[serde(borrow, default)] args: Option<A<'a>>,
}
#[allow(dead_code)]
struct A<'a> { v: Vec<(usize, LazyValue<'a>)> }
struct K(Option<usize>);
impl<'de> Deserialize<'de> for K {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = K;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result { f.write_str("k") }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<K, E> { Ok(K(_core::columns::key_index(s))) }
        }
        d.deserialize_str(V)
    }
}
impl<'de: 'a, 'a> Deserialize<'de> for A<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = A<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result { f.write_str("a") }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<A<'a>, M::Error> {
                let mut a = A { v: Vec::new() };
                while let Some(K(k)) = m.next_key::<K>()? {
                    match k { Some(i) => a.v.push((i, m.next_value::<LazyValue<'de>>()?)), None => { m.next_value::<IgnoredAny>()?; } }
                }
                Ok(a)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("path");
    let data = std::fs::read(&path).unwrap();
    let mut s = _core::scan::Scanner::new();
    let mut ev = Vec::new();
    let mut meta = Vec::new();
    s.scan(&data, 0, true, &mut ev, &mut meta).ok();
    let t = Instant::now();
    let mut n = 0;
    for &(a, b) in &ev {
        let e: Result<Ev, _> = sonic_rs::from_slice(&data[a..b]);
        if e.is_ok() { n += 1; }
    }
    let tj = t.elapsed().as_secs_f64();
    println!("sonic struct: {} ok {:.3}s = {:.0} MB/s", n, tj, data.len() as f64 / 1e6 / tj);
    let t = Instant::now();
    for &(a, b) in &ev {
        let e: Result<IgnoredAny, _> = sonic_rs::from_slice(&data[a..b]);
        if e.is_ok() { n += 1; }
    }
    let tj = t.elapsed().as_secs_f64();
    println!("sonic ignore: {:.3}s = {:.0} MB/s", tj, data.len() as f64 / 1e6 / tj);
}
