//! Decoder micro-benchmark: `cargo run --release --example bench -- FILE` (an uncompressed trace).
use std::time::Instant;

fn mbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: bench FILE");
    let data = std::fs::read(&path).unwrap();
    let t = Instant::now();
    let mut s = _core::scan::Scanner::new();
    let mut ev = Vec::new();
    let mut meta = Vec::new();
    s.scan(&data, 0, true, &mut ev, &mut meta).ok();
    let ts = t.elapsed().as_secs_f64();
    println!("scan: {} events in {:.3}s = {:.0} MB/s", ev.len(), ts, mbps(data.len(), ts));
    let t = Instant::now();
    let p = _core::event::parse_part(&data, &ev, 0);
    let tp = t.elapsed().as_secs_f64();
    println!("parse (1 thread): {:.3}s = {:.0} MB/s", tp, mbps(data.len(), tp));
    let t = Instant::now();
    let ok = ev.iter().filter(|&&(a, b)| serde_json::from_slice::<_core::event::RawEvent>(&data[a..b]).is_ok()).count();
    let tj = t.elapsed().as_secs_f64();
    println!("serde only: {} ok {:.3}s = {:.0} MB/s", ok, tj, mbps(data.len(), tj));
    let t = Instant::now();
    let ok = ev.iter().filter(|&&(a, b)| serde_json::from_slice::<serde::de::IgnoredAny>(&data[a..b]).is_ok()).count();
    let tj = t.elapsed().as_secs_f64();
    println!("serde ignore-all: {} ok {:.3}s = {:.0} MB/s", ok, tj, mbps(data.len(), tj));
    let t = Instant::now();
    let mut f = _core::event::Fields::new();
    let fast = ev.iter().filter(|&&(a, b)| _core::event::fast_fields(&data[a..b], &mut f)).count();
    let tf = t.elapsed().as_secs_f64();
    println!("fast_fields only: {} fast {:.3}s = {:.0} MB/s", fast, tf, mbps(data.len(), tf));
    let t = Instant::now();
    let mut c = _core::event::Columns::new();
    c.append(&p);
    println!("merge: {:.3}s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let d = _core::decode::decode(&path, &Default::default()).unwrap();
    let td = t.elapsed().as_secs_f64();
    println!("decode: {} events {:.3}s = {:.0} MB/s", d.columns.n, td, mbps(data.len(), td));
}
