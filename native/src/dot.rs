//! The reference dot product every m3 path scores with.
//!
//! Eight f32 lanes: lane `l` adds the products of the elements `l, l + 8, l + 16, ...` in order, from -0.0
//! (the identity of addition, bit for bit: `-0.0 + x` is `x`, so a lane is exactly its products' sum);
//! then `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`. Rust never fuses a multiply and an add
//! unless asked, so the result is the same bits on every machine, whatever SIMD width the compiler picks,
//! and m3's numpy fallback (`m3/retrieval/native.py`) reproduces it exactly with elementwise operations.

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

/// The int8 dot product, exact in i32 for any length below 133,000 (127 * 127 * n < 2^31).
///
/// A plain widening sum: measured here, a split into sixteen i16-product lanes was 3x slower on the
/// baseline x86-64 target (SSE2, no wide int8 multiply-add), which wheels are built for.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
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
}
