//! Top-k selection with m3's one order: score descending, then row ascending.

use std::cmp::Ordering;

fn order(a: &(f32, usize), b: &(f32, usize)) -> Ordering {
    // Scores are finite (callers drop NaN rows), so partial_cmp never fails.
    b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then(a.1.cmp(&b.1))
}

/// The best `n` of `(score, row)` pairs in m3's order.
pub fn best(mut scored: Vec<(f32, usize)>, n: usize) -> Vec<(f32, usize)> {
    if n == 0 {
        return Vec::new();
    }
    if scored.len() > n {
        scored.select_nth_unstable_by(n - 1, order);
        scored.truncate(n);
    }
    scored.sort_unstable_by(order); // the order is total: rows are distinct
    scored
}

/// The n-th largest of `values` (n >= 1, n <= len), by value only.
pub fn nth_largest(values: &mut [f64], n: usize) -> f64 {
    let (_, nth, _) = values.select_nth_unstable_by(n - 1, |a, b| b.partial_cmp(a).unwrap_or(Ordering::Equal));
    *nth
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_go_to_the_lower_row() {
        let got = best(vec![(1.0, 3), (2.0, 5), (1.0, 1), (2.0, 4)], 3);
        assert_eq!(got, vec![(2.0, 4), (2.0, 5), (1.0, 1)]);
        assert!(best(vec![(1.0, 0)], 0).is_empty());
    }
}
