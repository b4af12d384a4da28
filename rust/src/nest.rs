//! The TensorBoard plugin's operator nesting (`build_tree_relationship`), exactly: per thread,
//! nodes in (start, −end) order go through a stack; a node that starts inside the top of the stack
//! but ends after it crosses it and is dropped. One pass, O(n).

/// `tid`, `start`, `end` in the plugin's processing order (sorted by tid, start, −end, then row;
/// each thread contiguous). Returns (parent index or −1, depth with 1 = top level and 0 = dropped,
/// kept).
pub fn nest(tid: &[i64], start: &[i64], end: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<u8>) {
    let n = tid.len();
    let mut parent = vec![-1i64; n];
    let mut depth = vec![0i64; n];
    let mut kept = vec![1u8; n];
    let mut stack: Vec<usize> = Vec::new();
    for i in 0..n {
        if i == 0 || tid[i] != tid[i - 1] {
            stack.clear();
        }
        loop {
            match stack.last() {
                None => {
                    stack.push(i);
                    depth[i] = 1;
                    break;
                }
                Some(&top) => {
                    if start[i] < end[top] {
                        if end[i] <= end[top] {
                            parent[i] = top as i64;
                            stack.push(i);
                            depth[i] = stack.len() as i64;
                        } else {
                            kept[i] = 0;
                        }
                        break;
                    }
                    stack.pop();
                }
            }
        }
    }
    (parent, depth, kept)
}

/// Innermost enclosing span, for spans and instants in one sweep. Items (any order) are sorted by
/// (key, start, spans before instants that start at the same time, −end, index); spans of
/// positive length are the only ones that can enclose anything. For each item: the index of the
/// last-started span with `start <= item start < end` among the items before it in that order,
/// or −1. Sorting an index array here keeps the memory at 4 bytes per item besides the inputs.
pub fn enclosing(key: &[i64], start: &[i64], end: &[i64], is_point: &[u8]) -> Vec<i64> {
    let n = key.len();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&i| {
        let i = i as usize;
        (key[i], start[i], is_point[i], std::cmp::Reverse(end[i]), i)
    });
    let mut out = vec![-1i64; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut prev: Option<usize> = None;
    for &i in &order {
        let i = i as usize;
        if prev.is_none_or(|p| key[p] != key[i]) {
            stack.clear();
        }
        prev = Some(i);
        // spans pushed after an enclosing one and already ended sit above it: drop them
        while let Some(&top) = stack.last() {
            if end[top] <= start[i] {
                stack.pop();
            } else {
                break;
            }
        }
        if let Some(&top) = stack.last() {
            out[i] = top as i64;
        }
        if is_point[i] == 0 && end[i] > start[i] {
            stack.push(i);
        }
    }
    out
}

/// HTA's call stack (`ranksight.analyses._stacks`): events of positive duration give an open
/// marker at `ts` and a close marker at `end`; markers are ordered by (thread, time, closes before
/// opens, then opens longest first and by row, closes shortest first and by descending row). In
/// that order the stack size before an open is the event's depth (0 = top level) and its parent
/// is the last event opened before it on its thread at depth − 1. The two marker lists are sorted
/// separately and merged, so memory is two index arrays, not 2n markers with five sort keys.
/// Returns (parent index or −1, depth) per event.
pub fn call_stack(thread: &[i64], ts: &[i64], end: &[i64], row: &[i64]) -> (Vec<i64>, Vec<i64>) {
    let n = thread.len();
    let dur = |i: usize| end[i] - ts[i];
    let mut opens: Vec<u32> = (0..n as u32).collect();
    let mut closes: Vec<u32> = opens.clone();
    opens.sort_unstable_by_key(|&i| {
        let i = i as usize;
        (thread[i], ts[i], -dur(i), row[i])
    });
    closes.sort_unstable_by_key(|&i| {
        let i = i as usize;
        (thread[i], end[i], dur(i), -row[i])
    });
    let mut parent = vec![-1i64; n];
    let mut depth = vec![0i64; n];
    let mut last_open: Vec<i64> = Vec::new();
    let mut size: i64 = 0;
    let (mut o, mut c) = (0usize, 0usize);
    while o < n {
        let i = opens[o] as usize;
        if c < n {
            let j = closes[c] as usize;
            if (thread[j], end[j]) <= (thread[i], ts[i]) {
                size -= 1;
                c += 1;
                continue;
            }
        }
        let d = size.max(0);
        depth[i] = d;
        if d > 0 {
            parent[i] = last_open[(d - 1) as usize];
        }
        if last_open.len() <= d as usize {
            last_open.resize(d as usize + 1, -1);
        }
        last_open[d as usize] = i as i64;
        size += 1;
        o += 1;
    }
    (parent, depth)
}

#[cfg(test)]
mod tests {
    use super::{call_stack, enclosing, nest};

    #[test]
    fn call_stack_nests_by_markers() {
        // thread 1: A[0,10) holds B[2,5) and C[5,8) (C opens after B closes at 5); D[8,12)
        // crosses A: opened at depth 1 (A still open), so its parent is A; thread 2 restarts
        let thread = [1, 1, 1, 1, 2];
        let (ts, end, row) = ([0, 2, 5, 8, 0], [10, 5, 8, 12, 4], [0, 1, 2, 3, 4]);
        let (p, d) = call_stack(&thread, &ts, &end, &row);
        assert_eq!(p, vec![-1, 0, 0, 0, -1]);
        assert_eq!(d, vec![0, 1, 1, 1, 0]);
    }

    #[test]
    fn crossing_node_is_dropped_and_nesting_kept() {
        // [0,10) holds [1,5) and [6,9); [8,12) crosses [6,9)'s parent chain; thread 2 restarts
        let (tid, start, end) = ([1, 1, 1, 1, 2], [0, 1, 6, 8, 0], [10, 5, 9, 12, 3]);
        let (p, d, k) = nest(&tid, &start, &end);
        assert_eq!(p, vec![-1, 0, 0, -1, -1]);
        assert_eq!(d, vec![1, 2, 2, 0, 1]);
        assert_eq!(k, vec![1, 1, 1, 0, 1]);
    }

    #[test]
    fn crossing_spans_and_instants() {
        // A[0,10) B[5,15) crosses A; instant at 12 is inside B only; C[1,3) ended before 12
        let (key, start, end, point) = ([0, 0, 0, 0, 1], [0, 1, 5, 12, 12], [10, 3, 15, 12, 12], [0, 0, 0, 1, 1]);
        assert_eq!(enclosing(&key, &start, &end, &point), vec![-1, 0, 0, 2, -1]);
        // the same items in another order give the same answers (by original index)
        let perm = [4usize, 2, 0, 3, 1];
        let pick = |v: &[i64]| perm.iter().map(|&i| v[i]).collect::<Vec<i64>>();
        let point2: Vec<u8> = perm.iter().map(|&i| point[i]).collect();
        let got = enclosing(&pick(&key), &pick(&start), &pick(&end), &point2);
        let back: Vec<i64> = got.iter().map(|&j| if j < 0 { -1 } else { perm[j as usize] as i64 }).collect();
        let mut want = vec![0i64; 5];
        for (pos, &i) in perm.iter().enumerate() {
            want[pos] = [-1, 0, 0, 2, -1][i];
        }
        assert_eq!(back, want);
    }
}
