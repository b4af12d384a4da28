//! Longest path of a critical-path graph (`ranksight.views.critical_graph`), linear in nodes and
//! edges, with the tie-breaking of networkx's `dag_longest_path` (what HTA calls), so paths of
//! equal length come out as HTA's do:
//!
//! - the topological order is networkx's `topological_sort`: Kahn's generations, generation 0 the
//!   nodes without predecessors in node order, each next generation in the order its nodes' last
//!   predecessor edge is visited (nodes of a generation in order, each node's successors in edge
//!   insertion order);
//! - a node's distance is the largest `dist[u] + w(u, v)` over its predecessors in edge insertion
//!   order, the first one on ties; no predecessor, or a negative best, gives 0 and no predecessor;
//! - the path ends at the first node of the topological order with the largest distance.
//!
//! Edges are given once each (the caller keeps an edge's first position and its last weight).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Node indices of the longest path (first to last), or an error naming a cycle.
pub fn longest_path(n: usize, src: &[i64], dst: &[i64], w: &[i64]) -> Result<Vec<i64>, String> {
    let m = src.len();
    for k in 0..m {
        if src[k] < 0 || dst[k] < 0 || src[k] as usize >= n || dst[k] as usize >= n {
            return Err(format!("edge {k} ({}, {}) names a node outside 0..{n}", src[k], dst[k]));
        }
    }
    // successor and predecessor lists in edge order (counting sort, stable)
    let csr = |key: &[i64]| -> (Vec<usize>, Vec<u32>) {
        let mut start = vec![0usize; n + 1];
        for &k in key {
            start[k as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut idx = vec![0u32; m];
        for (e, &k) in key.iter().enumerate() {
            idx[fill[k as usize]] = e as u32;
            fill[k as usize] += 1;
        }
        (start, idx)
    };
    let (s_start, s_edges) = csr(src);
    let (p_start, p_edges) = csr(dst);
    let mut indeg: Vec<u32> = (0..n).map(|v| (p_start[v + 1] - p_start[v]) as u32).collect();
    let mut order: Vec<u32> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).collect();
    order.reserve(n - order.len());
    let (mut lo, mut hi) = (0usize, order.len());
    while lo < hi {
        for g in lo..hi {
            let u = order[g] as usize;
            for &e in &s_edges[s_start[u]..s_start[u + 1]] {
                let v = dst[e as usize] as usize;
                indeg[v] -= 1;
                if indeg[v] == 0 {
                    order.push(v as u32);
                }
            }
        }
        lo = hi;
        hi = order.len();
    }
    if order.len() < n {
        return Err(format!("the graph has a cycle ({} of {n} nodes cannot be ordered)", n - order.len()));
    }
    let mut dist = vec![0i64; n];
    let mut pred = vec![-1i64; n];
    for &v in &order {
        let v = v as usize;
        let mut best: Option<(i64, i64)> = None;
        for &e in &p_edges[p_start[v]..p_start[v + 1]] {
            let e = e as usize;
            let cand = dist[src[e] as usize] + w[e];
            if best.is_none_or(|(b, _)| cand > b) {
                best = Some((cand, src[e]));
            }
        }
        if let Some((d, u)) = best {
            if d >= 0 {
                dist[v] = d;
                pred[v] = u;
            }
        }
    }
    let mut path = Vec::new();
    if n == 0 {
        return Ok(path);
    }
    let mut end = order[0] as usize;
    for &v in &order {
        if dist[v as usize] > dist[end] {
            end = v as usize;
        }
    }
    let mut v = end as i64;
    while v >= 0 {
        path.push(v);
        v = pred[v as usize];
    }
    path.reverse();
    Ok(path)
}

/// Longest path over int64 buffers `src`, `dst`, `weight` (one entry per edge, in insertion
/// order) on nodes `0..n`: an int64 buffer of node indices, first to last. A cycle raises
/// ValueError.
#[pyfunction]
pub fn longest_path_nodes<'py>(py: Python<'py>, n: usize, src: &[u8], dst: &[u8], weight: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    crate::guard(|| {
        let (s, d, w) = (crate::i64s(src, "src")?, crate::i64s(dst, "dst")?, crate::i64s(weight, "weight")?);
        if s.len() != d.len() || s.len() != w.len() {
            return Err(PyValueError::new_err("src, dst and weight differ in length"));
        }
        let out = py.detach(|| longest_path(n, &s, &d, &w)).map_err(PyValueError::new_err)?;
        crate::i64_bytes(py, &out)
    })
}

#[cfg(test)]
mod tests {
    use super::longest_path;

    #[test]
    fn heaviest_chain_and_first_on_ties() {
        // 0 -> 1 (5) -> 3 (0); 0 -> 2 (5) -> 3 (0): equal, the first predecessor (1) wins
        let p = longest_path(4, &[0, 0, 1, 2], &[1, 2, 3, 3], &[5, 5, 0, 0]).unwrap();
        assert_eq!(p, vec![0, 1]);
        // the path ends at the first node of the topological order with the largest distance
        let p = longest_path(4, &[0, 0, 1, 2], &[1, 2, 3, 3], &[5, 6, 2, 0]).unwrap();
        assert_eq!(p, vec![0, 1, 3]);
        let p = longest_path(4, &[0, 0, 1, 2], &[1, 2, 3, 3], &[5, 6, 1, 0]).unwrap();
        assert_eq!(p, vec![0, 2]);
    }

    #[test]
    fn cycle_is_an_error() {
        assert!(longest_path(2, &[0, 1], &[1, 0], &[1, 1]).is_err());
        assert_eq!(longest_path(0, &[], &[], &[]).unwrap(), Vec::<i64>::new());
    }
}
