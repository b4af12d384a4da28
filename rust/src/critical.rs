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
//! Edges are given once each (the caller keeps an edge's first position and its last weight:
//! [`dedup_edges`]).
//!
//! Also the graph's construction steps that are one pass over millions of markers or edges:
//! the call-stack edges of the CPU threads ([`stack_edges`]) and the edge de-duplication.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Node indices of the longest path (first to last), or an error naming a cycle.
pub fn longest_path(n: usize, src: &[i64], dst: &[i64], w: &[i64]) -> Result<Vec<i64>, String> {
    longest_path_with_edges(n, src, dst, w).map(|(nodes, _)| nodes)
}

/// A graph's topological order (networkx's, module doc) and predecessor lists, made once for
/// any number of weightings of its edges.
pub struct Topo {
    src: Vec<i64>,
    p_start: Vec<usize>,
    p_edges: Vec<u32>,
    order: Vec<u32>,
}

impl Topo {
    /// The order of nodes `0..n` under edges `src[k] -> dst[k]`, or an error naming a bad edge or
    /// a cycle.
    pub fn new(n: usize, src: &[i64], dst: &[i64]) -> Result<Topo, String> {
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
        Ok(Topo { src: src.to_vec(), p_start, p_edges, order })
    }

    /// Each node's distance and the edge it is reached by (−1: none) when edge `k` weighs `w[k]`.
    fn dist_pred(&self, w: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let n = self.order.len();
        let mut dist = vec![0i64; n];
        let mut pred = vec![-1i64; n];
        for &v in &self.order {
            let v = v as usize;
            let mut best: Option<(i64, usize)> = None;
            for &e in &self.p_edges[self.p_start[v]..self.p_start[v + 1]] {
                let e = e as usize;
                let cand = dist[self.src[e] as usize] + w[e];
                if best.is_none_or(|(b, _)| cand > b) {
                    best = Some((cand, e));
                }
            }
            if let Some((d, e)) = best {
                if d >= 0 {
                    dist[v] = d;
                    pred[v] = e as i64;
                }
            }
        }
        (dist, pred)
    }

    /// The longest path's length (the sum of its edges' weights; 0 without nodes) when edge `k`
    /// weighs `w[k]`.
    pub fn length(&self, w: &[i64]) -> i64 {
        self.dist_pred(w).0.into_iter().max().unwrap_or(0)
    }

    /// The longest path as node indices and as the indices of its edges (first to last).
    pub fn path(&self, w: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let (dist, pred) = self.dist_pred(w);
        let mut path = Vec::new();
        let mut edges = Vec::new();
        if self.order.is_empty() {
            return (path, edges);
        }
        let mut end = self.order[0] as usize;
        for &v in &self.order {
            if dist[v as usize] > dist[end] {
                end = v as usize;
            }
        }
        let mut v = end;
        loop {
            path.push(v as i64);
            let e = pred[v];
            if e < 0 {
                break;
            }
            edges.push(e);
            v = self.src[e as usize] as usize;
        }
        path.reverse();
        edges.reverse();
        (path, edges)
    }
}

/// The longest path as node indices and as the indices of its edges (first to last).
pub fn longest_path_with_edges(n: usize, src: &[i64], dst: &[i64], w: &[i64]) -> Result<(Vec<i64>, Vec<i64>), String> {
    Ok(Topo::new(n, src, dst)?.path(w))
}

/// A graph on nodes `0..n` with edges `src[k] -> dst[k]` (int64 buffers, insertion order), ordered
/// once: the length of its longest path under each weighting of the edges (`length`), e.g. the
/// scenarios of a what-if replay. A cycle or a bad edge raises ValueError.
#[pyclass(module = "ranksight._core", frozen)]
pub struct LongestPathGraph {
    topo: Topo,
}

#[pymethods]
impl LongestPathGraph {
    #[new]
    fn py_new(py: Python<'_>, n: usize, src: &[u8], dst: &[u8]) -> PyResult<Self> {
        crate::guard(|| {
            let (s, d) = (crate::i64s(src, "src")?, crate::i64s(dst, "dst")?);
            if s.len() != d.len() {
                return Err(PyValueError::new_err("src and dst differ in length"));
            }
            let topo = py.detach(|| Topo::new(n, &s, &d)).map_err(PyValueError::new_err)?;
            Ok(LongestPathGraph { topo })
        })
    }

    /// The longest path's length when edge `k` weighs `weight[k]` (an int64 buffer, one entry
    /// per edge).
    fn length(&self, py: Python<'_>, weight: &[u8]) -> PyResult<i64> {
        crate::guard(|| {
            let w = crate::i64s(weight, "weight")?;
            if w.len() != self.topo.src.len() {
                return Err(PyValueError::new_err("weight has not one entry per edge"));
            }
            Ok(py.detach(|| self.topo.length(&w)))
        })
    }
}

/// One edge per (src, dst), at its first position (the order of first occurrence); its type and
/// weight from the last occurrence, its attributed row the last non-negative one (−1 if none):
/// networkx's `add_edge` over the insertion order. Returns (src, dst, type, weight, attr).
pub fn dedup_edges(n: usize, src: &[i64], dst: &[i64], typ: &[i64], w: &[i64], attr: &[i64]) -> Result<[Vec<i64>; 5], String> {
    let m = src.len();
    for k in 0..m {
        if src[k] < 0 || dst[k] < 0 || src[k] as usize >= n || dst[k] as usize >= n {
            return Err(format!("edge {k} ({}, {}) names a node outside 0..{n}", src[k], dst[k]));
        }
    }
    // the edges into each node, in edge order (stable counting sort by dst); duplicates share a
    // dst bucket, and buckets are small: most nodes have one or two predecessors
    let mut start = vec![0usize; n + 1];
    for &d in dst {
        start[d as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut into = vec![0u32; m];
    for (e, &d) in dst.iter().enumerate() {
        into[fill[d as usize]] = e as u32;
        fill[d as usize] += 1;
    }
    drop(fill);
    let mut keep = vec![true; m];
    let mut t_out: Vec<i64> = typ.to_vec();
    let mut w_out: Vec<i64> = w.to_vec();
    let mut a_out: Vec<i64> = attr.to_vec();
    let mut bucket: Vec<u32> = Vec::new();
    for v in 0..n {
        let b = &into[start[v]..start[v + 1]];
        if b.len() < 2 {
            continue;
        }
        bucket.clear();
        bucket.extend_from_slice(b);
        bucket.sort_by_key(|&e| (src[e as usize], e)); // by src, edge order within
        let mut g = 0;
        while g < bucket.len() {
            let first = bucket[g] as usize;
            let mut h = g + 1;
            while h < bucket.len() && src[bucket[h] as usize] == src[first] {
                keep[bucket[h] as usize] = false;
                h += 1;
            }
            if h > g + 1 {
                let last = bucket[h - 1] as usize;
                t_out[first] = typ[last];
                w_out[first] = w[last];
                a_out[first] = bucket[g..h].iter().rev().map(|&e| attr[e as usize]).find(|&a| a >= 0).unwrap_or(-1);
            }
            g = h;
        }
    }
    if keep.iter().all(|&k| k) {
        return Ok([src.to_vec(), dst.to_vec(), t_out, w_out, a_out]);
    }
    let pick = |v: &[i64]| -> Vec<i64> { (0..m).filter(|&k| keep[k]).map(|k| v[k]).collect() };
    Ok([pick(src), pick(dst), pick(&t_out), pick(&w_out), pick(&a_out)])
}

/// Edge type codes (`ranksight.views.critical_graph`).
const OPERATOR: i64 = 0;
const DEPENDENCY: i64 = 1;

/// Inputs of [`stack_edges`], one entry per CPU event in open order (thread, start, longer
/// first, row): the events of a thread are contiguous and a subtree lies on its root's thread.
pub struct StackInput<'a> {
    /// dense thread id, non-decreasing
    pub thread: &'a [i64],
    /// depth in the call stack (0 at top level)
    pub depth: &'a [i64],
    /// position of the parent (−1 at top level)
    pub ppos: &'a [i64],
    /// trace row and the parent's trace row (−1 at top level)
    pub row: &'a [i64],
    pub parent_row: &'a [i64],
    /// start and end node of the event (−1: the event has no nodes)
    pub start_node: &'a [i64],
    pub end_node: &'a [i64],
    /// the call takes the CUDA runtime lock / blocks on the GPU
    pub lock: &'a [u8],
    pub blocking: &'a [u8],
}

/// The call-stack edges (step 2 of the graph): per thread, the start and end markers of the
/// events with nodes in depth-first order (an event's end right after the last open position of
/// its subtree, deeper ends first), each linked to the marker before it; a dependency (weight
/// 0) into the start of a top-level event, else an operator edge weighted by the time between
/// the markers (0 into the end of a blocking call), attributed to the event whose start precedes,
/// else to the event that ends, else to the parent of the event that ended; two consecutive
/// markers of lock calls (start→start, start→end, end→end) are left to the lock edges.
/// `n_ts`: node times. Returns (src, dst, type, weight, attr) in marker order.
pub fn stack_edges(inp: &StackInput, n_ts: &[i64]) -> Result<[Vec<i64>; 5], String> {
    let n = inp.thread.len();
    let lens = [inp.depth.len(), inp.ppos.len(), inp.row.len(), inp.parent_row.len(), inp.start_node.len(), inp.end_node.len(), inp.lock.len(), inp.blocking.len()];
    if lens.iter().any(|&l| l != n) {
        return Err("stack_edges: the per-event arrays differ in length".to_string());
    }
    let node_ok = |v: i64| v < 0 || (v as usize) < n_ts.len();
    if !(0..n).all(|i| node_ok(inp.start_node[i]) && node_ok(inp.end_node[i])) {
        return Err("stack_edges: a node index outside the node times".to_string());
    }
    // last open position of each subtree, deepest level first
    let max_depth = inp.depth.iter().copied().max().unwrap_or(0).max(0) as usize;
    let mut level_start = vec![0usize; max_depth + 2];
    for &d in inp.depth {
        level_start[d.max(0) as usize + 1] += 1;
    }
    for d in 0..=max_depth {
        level_start[d + 1] += level_start[d];
    }
    let mut by_depth = vec![0u32; n];
    let mut fill = level_start.clone();
    for i in 0..n {
        let d = inp.depth[i].max(0) as usize;
        by_depth[fill[d]] = i as u32;
        fill[d] += 1;
    }
    let mut s_end: Vec<usize> = (0..n).collect();
    for d in (1..=max_depth).rev() {
        for &i in &by_depth[level_start[d]..level_start[d + 1]] {
            let p = inp.ppos[i as usize];
            if p >= 0 {
                let p = p as usize;
                if p >= n {
                    return Err(format!("stack_edges: parent position {p} outside 0..{n}"));
                }
                s_end[p] = s_end[p].max(s_end[i as usize]);
            }
        }
    }
    // the events with nodes that end after each position, deeper first (then by position)
    let kept = |i: usize| inp.start_node[i] >= 0;
    let mut ex_start = vec![0usize; n + 1];
    for i in (0..n).filter(|&i| kept(i)) {
        if inp.thread[s_end[i]] != inp.thread[i] {
            return Err(format!("stack_edges: the subtree of position {i} leaves its thread"));
        }
        ex_start[s_end[i] + 1] += 1;
    }
    for q in 0..n {
        ex_start[q + 1] += ex_start[q];
    }
    let mut exits = vec![0u32; ex_start[n]];
    let mut fill = ex_start.clone();
    for i in (0..n).filter(|&i| kept(i)) {
        exits[fill[s_end[i]]] = i as u32;
        fill[s_end[i]] += 1;
    }
    for q in 0..n {
        let b = &mut exits[ex_start[q]..ex_start[q + 1]];
        if b.len() > 1 {
            b.sort_by_key(|&i| (-inp.depth[i as usize], i));
        }
    }
    let [mut src, mut dst, mut typ, mut w, mut attr]: [Vec<i64>; 5] = Default::default();
    // the previous marker: (event position, is a start); open events with nodes on the thread
    let mut prev: Option<(usize, bool)> = None;
    let mut open: i64 = 0;
    let mut cur_thread = i64::MIN;
    let mut visit = |ev: usize, enter: bool| {
        if inp.thread[ev] != cur_thread {
            cur_thread = inp.thread[ev];
            prev = None;
            open = 0;
        }
        let depth_before = open;
        open += if enter { 1 } else { -1 };
        let node = if enter { inp.start_node[ev] } else { inp.end_node[ev] };
        if let Some((p, p_enter)) = prev {
            let lock_pair = inp.lock[p] != 0 && inp.lock[ev] != 0 && (p_enter || !enter);
            if !lock_pair {
                let s = if p_enter { inp.start_node[p] } else { inp.end_node[p] };
                let t = if enter && depth_before == 0 { DEPENDENCY } else { OPERATOR };
                let zero = (!enter && inp.blocking[ev] != 0) || t == DEPENDENCY;
                let a = if t != OPERATOR {
                    -1
                } else if p_enter {
                    inp.row[p]
                } else if !enter {
                    inp.row[ev]
                } else {
                    inp.parent_row[p]
                };
                src.push(s);
                dst.push(node);
                typ.push(t);
                w.push(if zero || s < 0 || node < 0 { 0 } else { n_ts[node as usize] - n_ts[s as usize] });
                attr.push(a);
            }
        }
        prev = Some((ev, enter));
    };
    for q in 0..n {
        if kept(q) {
            visit(q, true);
        }
        for &i in &exits[ex_start[q]..ex_start[q + 1]] {
            visit(i as usize, false);
        }
    }
    Ok([src, dst, typ, w, attr])
}

fn five_bytes<'py>(py: Python<'py>, v: &[Vec<i64>; 5]) -> PyResult<[Bound<'py, PyBytes>; 5]> {
    Ok([crate::i64_bytes(py, &v[0])?, crate::i64_bytes(py, &v[1])?, crate::i64_bytes(py, &v[2])?, crate::i64_bytes(py, &v[3])?, crate::i64_bytes(py, &v[4])?])
}

type FiveBytes<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// Edge indices of the longest path (see [`longest_path`]) over int64 buffers `src`, `dst`,
/// `weight` on nodes `0..n`: an int64 buffer, first to last. A cycle raises ValueError.
#[pyfunction]
pub fn longest_path_edges<'py>(py: Python<'py>, n: usize, src: &[u8], dst: &[u8], weight: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    crate::guard(|| {
        let (s, d, w) = (crate::i64s(src, "src")?, crate::i64s(dst, "dst")?, crate::i64s(weight, "weight")?);
        if s.len() != d.len() || s.len() != w.len() {
            return Err(PyValueError::new_err("src, dst and weight differ in length"));
        }
        let (_, edges) = py.detach(|| longest_path_with_edges(n, &s, &d, &w)).map_err(PyValueError::new_err)?;
        crate::i64_bytes(py, &edges)
    })
}

/// [`dedup_edges`] over int64 buffers on nodes `0..n`: (src, dst, type, weight, attr) buffers.
#[pyfunction]
pub fn dedup_graph_edges<'py>(py: Python<'py>, n: usize, src: &[u8], dst: &[u8], typ: &[u8], weight: &[u8], attr: &[u8]) -> PyResult<FiveBytes<'py>> {
    crate::guard(|| {
        let cols = [crate::i64s(src, "src")?, crate::i64s(dst, "dst")?, crate::i64s(typ, "type")?, crate::i64s(weight, "weight")?, crate::i64s(attr, "attr")?];
        if cols.iter().any(|c| c.len() != cols[0].len()) {
            return Err(PyValueError::new_err("src, dst, type, weight and attr differ in length"));
        }
        let out = py.detach(|| dedup_edges(n, &cols[0], &cols[1], &cols[2], &cols[3], &cols[4])).map_err(PyValueError::new_err)?;
        let [a, b, c, d, e] = five_bytes(py, &out)?;
        Ok((a, b, c, d, e))
    })
}

/// [`stack_edges`] over int64 buffers (`lock`, `blocking`: uint8) in open order and the node
/// times `n_ts`: (src, dst, type, weight, attr) buffers.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn call_stack_edges<'py>(
    py: Python<'py>,
    thread: &[u8],
    depth: &[u8],
    ppos: &[u8],
    row: &[u8],
    parent_row: &[u8],
    start_node: &[u8],
    end_node: &[u8],
    lock: &[u8],
    blocking: &[u8],
    n_ts: &[u8],
) -> PyResult<FiveBytes<'py>> {
    crate::guard(|| {
        let (t, d, p) = (crate::i64s(thread, "thread")?, crate::i64s(depth, "depth")?, crate::i64s(ppos, "ppos")?);
        let (r, pr) = (crate::i64s(row, "row")?, crate::i64s(parent_row, "parent_row")?);
        let (sn, en, ts) = (crate::i64s(start_node, "start_node")?, crate::i64s(end_node, "end_node")?, crate::i64s(n_ts, "n_ts")?);
        let inp = StackInput { thread: &t, depth: &d, ppos: &p, row: &r, parent_row: &pr, start_node: &sn, end_node: &en, lock, blocking };
        let out = py.detach(|| stack_edges(&inp, &ts)).map_err(PyValueError::new_err)?;
        let [a, b, c, d, e] = five_bytes(py, &out)?;
        Ok((a, b, c, d, e))
    })
}

#[cfg(test)]
mod tests {
    use super::{dedup_edges, longest_path, longest_path_with_edges, stack_edges, StackInput, Topo};

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

    #[test]
    fn path_edges_follow_the_nodes() {
        let (nodes, edges) = longest_path_with_edges(4, &[0, 0, 1, 2], &[1, 2, 3, 3], &[5, 6, 2, 0]).unwrap();
        assert_eq!(nodes, vec![0, 1, 3]);
        assert_eq!(edges, vec![0, 2]);
        let (nodes, edges) = longest_path_with_edges(1, &[], &[], &[]).unwrap();
        assert_eq!((nodes, edges), (vec![0], vec![]));
    }

    #[test]
    fn length_is_the_weight_of_the_path_under_each_weighting() {
        let (src, dst) = ([0, 0, 1, 2], [1, 2, 3, 3]);
        let topo = Topo::new(4, &src, &dst).unwrap();
        for w in [[5, 6, 2, 0], [5, 6, 1, 0], [5, 5, 0, 0], [-3, -1, 4, 2], [-3, -1, -4, -2], [5, 6, -10, -10]] {
            let (_, edges) = longest_path_with_edges(4, &src, &dst, &w).unwrap();
            let sum: i64 = edges.iter().map(|&e| w[e as usize]).sum();
            assert_eq!(topo.length(&w), sum, "weights {w:?}");
        }
        // a negative best restarts the path at 0: 0 -> 1 (-3) -> 3 (4) gives 3 -> 4, not 1
        assert_eq!(topo.length(&[-3, -1, 4, 2]), 4);
        assert_eq!(topo.length(&[-3, -1, -4, -2]), 0);
        // the longest path may end before the sink: 0 -> 2 (6), the sink restarting at 0
        assert_eq!(topo.length(&[5, 6, -10, -10]), 6);
        assert_eq!(Topo::new(0, &[], &[]).unwrap().length(&[]), 0);
        assert!(Topo::new(2, &[0, 1], &[1, 0]).is_err());
    }

    #[test]
    fn dedup_keeps_the_first_position_and_the_last_values() {
        // (0, 1) three times: first at 0; type and weight of the last; the last attr >= 0
        let src = [0, 1, 0, 2, 0];
        let dst = [1, 2, 1, 3, 1];
        let typ = [0, 1, 4, 2, 3];
        let w = [5, 1, 6, 2, 7];
        let attr = [7, -1, 9, 4, -1];
        let [s, d, t, ww, a] = dedup_edges(4, &src, &dst, &typ, &w, &attr).unwrap();
        assert_eq!(s, vec![0, 1, 2]);
        assert_eq!(d, vec![1, 2, 3]);
        assert_eq!(t, vec![3, 1, 2]);
        assert_eq!(ww, vec![7, 1, 2]);
        assert_eq!(a, vec![9, -1, 4]);
        // nothing to merge: unchanged
        let [s, d, ..] = dedup_edges(3, &[0, 1], &[1, 2], &[0, 0], &[1, 1], &[-1, -1]).unwrap();
        assert_eq!((s, d), (vec![0, 1], vec![1, 2]));
        assert!(dedup_edges(2, &[0], &[2], &[0], &[0], &[0]).is_err());
    }

    #[test]
    fn call_stack_markers_in_depth_first_order() {
        // thread 0: A [0, 100] holds B [10, 20] (a lock call) and C [30, 60] (blocking), then D
        // [110, 120]; thread 1: E [5, 8]. Nodes in time order: A.s 0, B.s 1, B.e 2, C.s 3, C.e 4,
        // A.e 5, D.s 6, D.e 7, E.s 8, E.e 9
        let n_ts = [0, 10, 20, 30, 60, 100, 110, 120, 5, 8];
        let inp = StackInput {
            thread: &[0, 0, 0, 0, 1],
            depth: &[0, 1, 1, 0, 0],
            ppos: &[-1, 0, 0, -1, -1],
            row: &[100, 101, 102, 103, 104],
            parent_row: &[-1, 100, 100, -1, -1],
            start_node: &[0, 1, 3, 6, 8],
            end_node: &[5, 2, 4, 7, 9],
            lock: &[0, 1, 0, 0, 0],
            blocking: &[0, 0, 1, 0, 0],
        };
        let [s, d, t, w, a] = stack_edges(&inp, &n_ts).unwrap();
        // B's start→end is left to the lock edges; C ends before A (deeper first); D is a
        // top-level start (a dependency); E's thread starts afresh
        assert_eq!(s, vec![0, 2, 3, 4, 5, 6, 8]);
        assert_eq!(d, vec![1, 3, 4, 5, 6, 7, 9]);
        assert_eq!(t, vec![0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(w, vec![10, 10, 0, 40, 0, 10, 3]);
        assert_eq!(a, vec![100, 100, 102, 100, -1, 103, 104]);
        // a subtree that leaves its thread is refused
        let bad = StackInput { thread: &[0, 1], depth: &[0, 1], ppos: &[-1, 0], row: &[1, 2], parent_row: &[-1, 1], start_node: &[0, 1], end_node: &[3, 2], lock: &[0, 0], blocking: &[0, 0] };
        assert!(stack_edges(&bad, &[0, 1, 2, 3]).is_err());
    }
}
