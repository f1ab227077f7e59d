//! The reference dot product every m3 path scores with.
//!
//! Eight f32 lanes: lane `l` adds the products of the elements `l, l + 8, l + 16, ...` in order, from -0.0
//! (the identity of addition, bit for bit: `-0.0 + x` is `x`, so a lane is exactly its products' sum);
//! then `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`. Rust never fuses a multiply and an add
//! unless asked, so the result is the same bits on every machine, whatever SIMD width runs it (the
//! explicit AVX and SSE2 forms of [`score_rows`] included), and m3's numpy fallback (`m3/retrieval/native.py`) reproduces it exactly with elementwise operations.

pub const LANES: usize = 8;

/// `sum(a[i] * b[i])` in the reference order (see the module doc).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [-0.0f32; LANES];
    let full = a.len() / LANES * LANES;
    for (ca, cb) in a[..full].chunks_exact(LANES).zip(b[..full].chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += ca[l] * cb[l];
        }
    }
    for (l, (x, y)) in a[full..].iter().zip(&b[full..]).enumerate() {
        acc[l] += x * y;
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// How many rows [`score_rows`] scores side by side.
const BLOCK: usize = 4;

/// The reference dot of each of `rows` of `data` (rows of `query.len()` values) with `query`, in order.
///
/// The same bits as [`dot`] for every row: on x86-64 each lane group is one vector register (eight f32 lanes
/// with AVX, two registers of four without), multiplied and then added, never fused (no FMA), in the same
/// order as [`dot`]'s scalar lanes; four rows are scored side by side so that their additions overlap.
/// Elsewhere [`dot`] itself runs row by row. From [`PARALLEL_ROWS`] rows the rows are split over up to
/// [`MAX_PARTS`] threads: a large matrix is read at the speed of memory, which one core does not reach.
pub fn score_rows(data: &[f32], rows: &[usize], query: &[f32]) -> Vec<f32> {
    if rows.len() < PARALLEL_ROWS {
        return score_serial(data, rows, query);
    }
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_PARTS);
    if parts < 2 {
        return score_serial(data, rows, query);
    }
    let size = rows.len().div_ceil(parts);
    std::thread::scope(|scope| {
        let parts: Vec<_> = rows.chunks(size).map(|part| scope.spawn(move || score_serial(data, part, query))).collect();
        parts.into_iter().flat_map(|part| part.join().expect("scoring cannot panic")).collect()
    })
}

/// Rows from which [`score_rows`] splits the work over the cores (below, starting threads costs more).
const PARALLEL_ROWS: usize = 32_768;
/// Most threads [`score_rows`] uses.
const MAX_PARTS: usize = 4;

fn score_serial(data: &[f32], rows: &[usize], query: &[f32]) -> Vec<f32> {
    let d = query.len();
    let row = |r: usize| &data[r * d..(r + 1) * d];
    let mut out = Vec::with_capacity(rows.len());
    let mut blocks = rows.chunks_exact(BLOCK);
    for block in &mut blocks {
        out.extend_from_slice(&dot_block([row(block[0]), row(block[1]), row(block[2]), row(block[3])], query));
    }
    out.extend(blocks.remainder().iter().map(|&r| dot(row(r), query)));
    out
}

#[cfg(target_arch = "x86_64")]
fn dot_block(a: [&[f32]; BLOCK], query: &[f32]) -> [f32; BLOCK] {
    let full = query.len() / LANES * LANES;
    // The check is one load of a flag std caches after the first call.
    let mut lanes = if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has just been found to support AVX.
        unsafe { x86::lanes_avx(a, &query[..full]) }
    } else {
        // SAFETY: SSE2 is part of every x86-64 processor.
        unsafe { x86::lanes_sse2(a, &query[..full]) }
    };
    for (sums, row) in lanes.iter_mut().zip(a) {
        for (l, (x, y)) in row[full..].iter().zip(&query[full..]).enumerate() {
            sums[l] += x * y;
        }
    }
    lanes.map(|s| finish(&s))
}

#[cfg(not(target_arch = "x86_64"))]
fn dot_block(a: [&[f32]; BLOCK], query: &[f32]) -> [f32; BLOCK] {
    a.map(|row| dot(row, query))
}

fn finish(s: &[f32; LANES]) -> f32 {
    ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The lane sums of [`super::dot`] for four rows at once, over whole groups of eight (`query.len()` is a
    //! multiple of eight, every row at least as long).

    use super::{BLOCK, LANES};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx")]
    pub unsafe fn lanes_avx(a: [&[f32]; BLOCK], query: &[f32]) -> [[f32; LANES]; BLOCK] {
        let mut acc = [_mm256_set1_ps(-0.0); BLOCK];
        let mut at = 0;
        while at < query.len() {
            let q = _mm256_loadu_ps(query.as_ptr().add(at));
            for (sum, row) in acc.iter_mut().zip(a) {
                debug_assert!(row.len() >= at + LANES);
                *sum = _mm256_add_ps(*sum, _mm256_mul_ps(_mm256_loadu_ps(row.as_ptr().add(at)), q));
            }
            at += LANES;
        }
        let mut out = [[0.0f32; LANES]; BLOCK];
        for (lanes, sum) in out.iter_mut().zip(acc) {
            _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
        }
        out
    }

    pub unsafe fn lanes_sse2(a: [&[f32]; BLOCK], query: &[f32]) -> [[f32; LANES]; BLOCK] {
        let mut low = [_mm_set1_ps(-0.0); BLOCK];
        let mut high = [_mm_set1_ps(-0.0); BLOCK];
        let mut at = 0;
        while at < query.len() {
            let (q0, q1) = (_mm_loadu_ps(query.as_ptr().add(at)), _mm_loadu_ps(query.as_ptr().add(at + 4)));
            for ((lo, hi), row) in low.iter_mut().zip(high.iter_mut()).zip(a) {
                debug_assert!(row.len() >= at + LANES);
                *lo = _mm_add_ps(*lo, _mm_mul_ps(_mm_loadu_ps(row.as_ptr().add(at)), q0));
                *hi = _mm_add_ps(*hi, _mm_mul_ps(_mm_loadu_ps(row.as_ptr().add(at + 4)), q1));
            }
            at += LANES;
        }
        let mut out = [[0.0f32; LANES]; BLOCK];
        for ((lanes, lo), hi) in out.iter_mut().zip(low).zip(high) {
            _mm_storeu_ps(lanes.as_mut_ptr(), lo);
            _mm_storeu_ps(lanes.as_mut_ptr().add(4), hi);
        }
        out
    }

    /// The exact int8 dot of `row` with `query` (the query widened to i16 beforehand, `query.len()` values).
    #[target_feature(enable = "avx2")]
    pub unsafe fn dot_i8_avx2(row: &[i8], query: &[i16]) -> i32 {
        const STEP: usize = 16;
        let full = query.len() / STEP * STEP;
        let mut acc = _mm256_setzero_si256();
        let mut at = 0;
        while at < full {
            let x = _mm256_cvtepi8_epi16(_mm_loadu_si128(row.as_ptr().add(at).cast()));
            let y = _mm256_loadu_si256(query.as_ptr().add(at).cast());
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
            at += STEP;
        }
        let mut lanes = [0i32; 8];
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc);
        let tail: i32 = row[full..].iter().zip(&query[full..]).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
        lanes.iter().sum::<i32>() + tail
    }
}

/// The int8 dot product, exact in i32 for any length below 133,000 (127 * 127 * n < 2^31).
///
/// A plain widening sum: measured here, a split into sixteen i16-product lanes was 3x slower on the
/// baseline x86-64 target (SSE2, no wide int8 multiply-add), which wheels are built for.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// [`dot_i8`] of each of `rows` of `values` (rows of `query.len()` values) with `query`, in order.
///
/// Integer sums are exact in any order, so on x86-64 with AVX2 the products are widened to i16 and summed
/// in pairs by `vpmaddwd` (sixteen at a time), picked at run time; the result is the same number.
pub fn dot_i8_rows(values: &[i8], rows: &[usize], query: &[i8]) -> Vec<i32> {
    let d = query.len();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            let wide: Vec<i16> = query.iter().map(|&v| i16::from(v)).collect();
            // SAFETY: the processor has just been found to support AVX2; each row holds `d` values.
            return rows.iter().map(|&r| unsafe { x86::dot_i8_avx2(&values[r * d..(r + 1) * d], &wide) }).collect();
        }
    }
    rows.iter().map(|&r| dot_i8(&values[r * d..(r + 1) * d], query)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_on_small_integers() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let b = vec![1.0f32; 19];
        assert_eq!(dot(&a, &b), 171.0);
        assert_eq!(dot(&[], &[]).to_bits(), (-0.0f32).to_bits());
        assert_eq!(dot(&[0.0], &[-1.0]).to_bits(), (-0.0f32).to_bits());
        assert_eq!(dot_i8(&[127, -127], &[127, 127]), 0);
    }

    #[test]
    fn dot_i8_rows_gives_dot_i8_exactly() {
        for dim in [1usize, 15, 16, 17, 33, 384] {
            let values: Vec<i8> = (0..dim * 9).map(|i| ((i * 7919 % 255) as i32 - 127) as i8).collect();
            let query: Vec<i8> = (0..dim).map(|i| ((i * 104_729 % 255) as i32 - 127) as i8).collect();
            let rows = [8usize, 0, 3, 3, 5];
            let got = dot_i8_rows(&values, &rows, &query);
            for (sum, &r) in got.iter().zip(&rows) {
                assert_eq!(*sum, dot_i8(&values[r * dim..(r + 1) * dim], &query));
            }
        }
        let extreme = vec![-127i8; 384];
        assert_eq!(dot_i8_rows(&extreme, &[0], &extreme), vec![127 * 127 * 384]);
    }

    #[test]
    fn score_rows_split_over_threads_keeps_order_and_bits() {
        let dim = 19;
        let n = PARALLEL_ROWS + 1001;
        let data: Vec<f32> = (0..dim * n).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1.000_123e-3).collect();
        let query: Vec<f32> = (0..dim).map(|i| (i as f32 - 9.0) * 0.37).collect();
        let rows: Vec<usize> = (0..n).rev().collect();
        let got = score_rows(&data, &rows, &query);
        assert_eq!(got.len(), n);
        for (score, &r) in got.iter().zip(&rows) {
            assert_eq!(score.to_bits(), dot(&data[r * dim..(r + 1) * dim], &query).to_bits());
        }
    }

    #[test]
    fn score_rows_gives_the_bits_of_dot() {
        // Values whose sums round differently in another order, rows in any order, a tail past whole groups.
        for dim in [1usize, 7, 8, 9, 19, 384] {
            let data: Vec<f32> = (0..dim * 11).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1.000_123e-3).collect();
            let query: Vec<f32> = (0..dim).map(|i| ((i * 104_729 % 977) as f32 - 488.0) * 0.999_71e-2).collect();
            let rows = [10usize, 0, 3, 3, 7, 1, 2, 9, 4];
            let got = score_rows(&data, &rows, &query);
            for (score, &r) in got.iter().zip(&rows) {
                assert_eq!(score.to_bits(), dot(&data[r * dim..(r + 1) * dim], &query).to_bits());
            }
            #[cfg(target_arch = "x86_64")]
            {
                let full = dim / LANES * LANES;
                let block: [&[f32]; BLOCK] = [0usize, 3, 5, 10].map(|r| &data[r * dim..(r + 1) * dim]);
                // SAFETY: SSE2 is part of every x86-64 processor; AVX only where detected.
                let sse2 = unsafe { x86::lanes_sse2(block, &query[..full]) };
                if std::arch::is_x86_feature_detected!("avx") {
                    let avx = unsafe { x86::lanes_avx(block, &query[..full]) };
                    assert_eq!(sse2.map(|l| l.map(f32::to_bits)), avx.map(|l| l.map(f32::to_bits)));
                }
            }
        }
    }
}
