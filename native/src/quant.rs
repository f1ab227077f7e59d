//! An int8 copy of the matrix and a top-k over it whose result equals the exact f32 top-k.
//!
//! Each row is scaled by `s = max|a_i| / 127` and rounded, so `a_i = s * (x_i + e_i)` with `|e_i| <= 1/2`
//! (plus the f32 rounding of `a_i / s`). For a query quantised the same way (`q_i = t * (y_i + f_i)`):
//!
//! `|a . q - s t (x . y)| <= s t (0.501 sum|x| + 0.501 sum|y| + 0.251 d)`
//!
//! and the reference f32 dot (`dot::dot`) is within `gamma_d * sum|a_i q_i|` of the true one. So every
//! row's exact score lies in `[approx - w, approx + w]`. With `L` the n-th largest lower end, a row whose
//! upper end is below `L` has n rows certainly above it; every other row (the shortlist) is re-scored with
//! the reference dot and the best n of those are, bit for bit, the exact top n (ties by row).

use crate::dot::{dot, dot_i8_rows};
use crate::topk::{best, nth_largest};

/// One row (or the query) quantised: values, scale, and the sum of the values' magnitudes.
pub struct Quantised {
    pub values: Vec<i8>,
    pub scale: f32,
    pub abs_sum: i32,
}

pub fn quantise(row: &[f32]) -> Quantised {
    let top = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = top / 127.0;
    let values: Vec<i8> = if scale > 0.0 {
        row.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect()
    } else {
        vec![0; row.len()] // a zero row: its score is 0 exactly, and so is the bound below
    };
    let abs_sum = values.iter().map(|&v| i32::from(v).abs()).sum();
    Quantised { values, scale, abs_sum }
}

/// The int8 view of a matrix: rows of `dim` values, one scale and magnitude sum per row.
pub struct Int8Matrix<'a> {
    pub values: &'a [i8],
    pub scales: &'a [f32],
    pub abs_sums: &'a [i32],
    pub dim: usize,
}

/// The exact top `n` of `rows` (scores by the reference f32 dot over `mat`), found through the int8 copy.
pub fn top(q8: &Int8Matrix, mat: &[f32], query: &[f32], rows: &[usize], n: usize) -> Vec<(f32, usize)> {
    let d = q8.dim;
    let exact = |r: usize| (dot(&mat[r * d..(r + 1) * d], query), r);
    if n == 0 || rows.is_empty() {
        return Vec::new();
    }
    if n >= rows.len() {
        return best(rows.iter().map(|&r| exact(r)).collect(), n);
    }
    let y = quantise(query);
    let gamma = gamma(d);
    let (t, y_abs) = (f64::from(y.scale), f64::from(y.abs_sum));
    let mut centre = Vec::with_capacity(rows.len());
    let mut width = Vec::with_capacity(rows.len());
    let sums = dot_i8_rows(q8.values, rows, &y.values);
    for (&r, &sum) in rows.iter().zip(&sums) {
        let s = f64::from(q8.scales[r]);
        let st = s * t;
        let x_abs = f64::from(q8.abs_sums[r]);
        let approx = st * f64::from(sum);
        let quantisation = st * (0.501 * x_abs + 0.501 * y_abs + 0.251 * d as f64);
        let rounding = gamma * 127.01 * st * (x_abs + 0.501 * d as f64);
        centre.push(approx);
        // The small relative and absolute slack covers the f64 arithmetic of the bound itself.
        width.push((quantisation + rounding) * (1.0 + 1e-9) + 1e-30);
    }
    let mut lower: Vec<f64> = centre.iter().zip(&width).map(|(c, w)| c - w).collect();
    let floor = nth_largest(&mut lower, n);
    let shortlist = rows
        .iter()
        .zip(centre.iter().zip(&width))
        .filter(|(_, (c, w))| *c + *w >= floor)
        .map(|(&r, _)| exact(r))
        .collect();
    best(shortlist, n)
}

/// `gamma_d = d u / (1 - d u)`, the classic bound on a d-term f32 sum's relative error (u = 2^-24).
pub fn gamma(d: usize) -> f64 {
    let du = d as f64 * f64::powi(2.0, -24);
    du / (1.0 - du)
}
