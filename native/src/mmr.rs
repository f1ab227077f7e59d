//! Maximal marginal relevance over a pool whose members all have a vector.
//!
//! The same arithmetic as `m3.retrieval.ranking.mmr`, in f64 with the same operation order: each pick is
//! the first (lowest pool index) maximum of `lam * score - (1 - lam) * max_sim`, where `max_sim` is the
//! highest `max(0, dot)` to anything picked so far (reference dot, `dot::dot`).

use crate::dot::dot;

/// Pool indices in the order MMR picks them, at most `k`.
pub fn pick(vectors: &[f32], dim: usize, scores: &[f64], k: usize, lam: f64) -> Vec<usize> {
    let mut max_sim = vec![0.0f64; scores.len()];
    let mut remaining: Vec<usize> = (0..scores.len()).collect();
    let mut chosen = Vec::with_capacity(k.min(scores.len()));
    let row = |i: usize| &vectors[i * dim..(i + 1) * dim];
    while !remaining.is_empty() && chosen.len() < k {
        let mut at = 0;
        let mut top = f64::NEG_INFINITY;
        for (pos, &i) in remaining.iter().enumerate() {
            let value = lam * scores[i] - (1.0 - lam) * max_sim[i];
            if pos == 0 || value > top {
                (at, top) = (pos, value);
            }
        }
        let picked = remaining.remove(at);
        chosen.push(picked);
        for &i in &remaining {
            let sim = f64::from(dot(row(i), row(picked)));
            let sim = if sim > 0.0 { sim } else { 0.0 };
            if sim > max_sim[i] {
                max_sim[i] = sim;
            }
        }
    }
    chosen
}
