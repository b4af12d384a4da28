//! Decoder micro-benchmark: `cargo run --release --example bench -- FILE`.
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("path");
    let data = std::fs::read(&path).unwrap();
    let t = Instant::now();
    let mut s = _core::scan::Scanner::new();
    let mut ev = Vec::new();
    let mut meta = Vec::new();
    s.scan(&data, 0, true, &mut ev, &mut meta).ok();
    let ts = t.elapsed().as_secs_f64();
    println!("scan: {} events in {:.3}s = {:.0} MB/s", ev.len(), ts, data.len() as f64 / 1e6 / ts);
    let t = Instant::now();
    let p = _core::event::parse_part(&data, &ev, 0);
    let tp = t.elapsed().as_secs_f64();
    println!("parse (1 thread): {:.3}s = {:.0} MB/s", tp, data.len() as f64 / 1e6 / tp);
    let t = Instant::now();
    let mut n = 0usize;
    for &(a, b) in &ev {
        let e: Result<_core::event::RawEvent, _> = serde_json::from_slice(&data[a..b]);
        if e.is_ok() { n += 1; }
    }
    let tj = t.elapsed().as_secs_f64();
    println!("serde only: {} ok {:.3}s = {:.0} MB/s", n, tj, data.len() as f64 / 1e6 / tj);
    let t = Instant::now();
    for &(a, b) in &ev {
        let e: Result<serde::de::IgnoredAny, _> = serde_json::from_slice(&data[a..b]);
        if e.is_ok() { n += 1; }
    }
    let tj = t.elapsed().as_secs_f64();
    println!("serde ignore-all: {:.3}s = {:.0} MB/s", tj, data.len() as f64 / 1e6 / tj);
    let t = Instant::now();
    let mut m = 0usize;
    for &(a, b) in &ev {
        let mut f = _core::event::Fields::new(); if _core::event::fast_fields(&data[a..b], &mut f) { m += f.present as usize & 1; }
    }
    let tf = t.elapsed().as_secs_f64();
    println!("fast_fields only: {} {:.3}s = {:.0} MB/s", m, tf, data.len() as f64 / 1e6 / tf);
    let t = Instant::now();
    let mut c = _core::event::Columns::new();
    c.append(&p);
    println!("merge: {:.3}s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let d = _core::decode::decode(&path, &Default::default()).unwrap();
    let td = t.elapsed().as_secs_f64();
    println!("decode: {} events {:.3}s = {:.0} MB/s", d.columns.n, td, data.len() as f64 / 1e6 / td);
}

#[allow(dead_code)]
fn unused() {}
