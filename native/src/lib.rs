//! `m3_native`: m3's hot retrieval loops, called from `m3/retrieval/native.py`.
//!
//! Every function returns what the numpy path in `m3.retrieval` returns for the same input: the
//! reference dot product (`dot`), one order for ties (score descending, then row ascending, `topk`), the
//! int8 shortlist rule (`quant`) and MMR's arithmetic (`mmr`). The GIL is released while they compute.

mod dot;
mod mmr;
mod quant;
mod topk;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

type Top<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f32>>);

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| PyValueError::new_err(format!("{what} must be C-contiguous")))
}

fn matrix<'a, T: numpy::Element>(a: &'a PyReadonlyArray2<T>, what: &str) -> PyResult<(&'a [T], usize, usize)> {
    let shape = a.shape();
    let data = a.as_slice().map_err(|_| PyValueError::new_err(format!("{what} must be C-contiguous")))?;
    Ok((data, shape[0], shape[1]))
}

/// Checked row numbers: each must name a row of a matrix of `len` rows.
fn row_list(rows: &[i64], len: usize) -> PyResult<Vec<usize>> {
    rows.iter()
        .map(|&r| usize::try_from(r).ok().filter(|&r| r < len))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| PyValueError::new_err(format!("row numbers must lie in 0..{len}")))
}

fn check_dim(dim: usize, query: &[f32]) -> PyResult<()> {
    if dim != query.len() {
        return Err(PyValueError::new_err(format!("query has {} values, the matrix {dim} columns", query.len())));
    }
    Ok(())
}

fn into_arrays<'py>(py: Python<'py>, found: Vec<(f32, usize)>) -> Top<'py> {
    let rows = found.iter().map(|&(_, r)| r as i64).collect();
    let scores = found.iter().map(|&(s, _)| s).collect();
    (PyArray1::from_vec(py, rows), PyArray1::from_vec(py, scores))
}

/// The reference dot product of every row of `mat` with `query` (f32).
#[pyfunction]
fn dot_rows<'py>(py: Python<'py>, mat: PyReadonlyArray2<'py, f32>, query: PyReadonlyArray1<'py, f32>)
    -> PyResult<Bound<'py, PyArray1<f32>>> {
    let (data, n, d) = matrix(&mat, "mat")?;
    let q = slice(&query, "query")?;
    check_dim(d, q)?;
    let rows: Vec<usize> = (0..n).collect();
    let out = py.allow_threads(|| dot::score_rows(data, &rows, q));
    Ok(PyArray1::from_vec(py, out))
}

/// The best `n` of `rows` by reference dot with `query`: (rows, scores), ties by row.
#[pyfunction]
fn top_f32<'py>(py: Python<'py>, mat: PyReadonlyArray2<'py, f32>, query: PyReadonlyArray1<'py, f32>, n: usize,
                rows: PyReadonlyArray1<'py, i64>) -> PyResult<Top<'py>> {
    let (data, len, d) = matrix(&mat, "mat")?;
    let q = slice(&query, "query")?;
    check_dim(d, q)?;
    let rows = row_list(slice(&rows, "rows")?, len)?;
    let found = py.allow_threads(|| {
        let scores = dot::score_rows(data, &rows, q);
        topk::best(scores.into_iter().zip(rows.iter().copied()).collect(), n)
    });
    Ok(into_arrays(py, found))
}

/// The int8 copy of `mat`: (values, per-row scales, per-row sums of |value|).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn quantise<'py>(py: Python<'py>, mat: PyReadonlyArray2<'py, f32>)
    -> PyResult<(Bound<'py, PyArray2<i8>>, Bound<'py, PyArray1<f32>>, Bound<'py, PyArray1<i32>>)> {
    let (data, n, d) = matrix(&mat, "mat")?;
    let (values, scales, sums) = py.allow_threads(|| {
        let mut values = Vec::with_capacity(n * d);
        let (mut scales, mut sums) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for r in 0..n {
            let q = quant::quantise(&data[r * d..(r + 1) * d]);
            values.extend_from_slice(&q.values);
            scales.push(q.scale);
            sums.push(q.abs_sum);
        }
        (values, scales, sums)
    });
    let values = PyArray1::from_vec(py, values).reshape([n, d])?;
    Ok((values, PyArray1::from_vec(py, scales), PyArray1::from_vec(py, sums)))
}

/// The same result as `top_f32`, found by scanning the int8 copy and re-scoring a shortlist in f32.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn top_i8<'py>(py: Python<'py>, values: PyReadonlyArray2<'py, i8>, scales: PyReadonlyArray1<'py, f32>,
               abs_sums: PyReadonlyArray1<'py, i32>, mat: PyReadonlyArray2<'py, f32>,
               query: PyReadonlyArray1<'py, f32>, n: usize, rows: PyReadonlyArray1<'py, i64>) -> PyResult<Top<'py>> {
    let (data, len, d) = matrix(&mat, "mat")?;
    let (q8, len8, d8) = matrix(&values, "values")?;
    let (scales, abs_sums) = (slice(&scales, "scales")?, slice(&abs_sums, "abs_sums")?);
    if (len8, d8) != (len, d) || scales.len() != len || abs_sums.len() != len {
        return Err(PyValueError::new_err("the int8 copy does not have the matrix's shape"));
    }
    let q = slice(&query, "query")?;
    check_dim(d, q)?;
    let rows = row_list(slice(&rows, "rows")?, len)?;
    let copy = quant::Int8Matrix { values: q8, scales, abs_sums, dim: d };
    let found = py.allow_threads(|| quant::top(&copy, data, q, &rows, n));
    Ok(into_arrays(py, found))
}

/// MMR over a pool whose every member has a vector: pool indices in pick order, at most `k`.
#[pyfunction]
#[pyo3(name = "mmr")]
fn mmr_order<'py>(py: Python<'py>, vectors: PyReadonlyArray2<'py, f32>, scores: PyReadonlyArray1<'py, f64>, k: usize,
            lam: f64) -> PyResult<Vec<usize>> {
    let (data, n, d) = matrix(&vectors, "vectors")?;
    let scores = slice(&scores, "scores")?;
    if scores.len() != n {
        return Err(PyValueError::new_err("one score per vector is needed"));
    }
    Ok(py.allow_threads(|| mmr::pick(data, d, scores, k, lam)))
}

#[pymodule]
fn m3_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LANES", dot::LANES)?;
    m.add_function(wrap_pyfunction!(dot_rows, m)?)?;
    m.add_function(wrap_pyfunction!(top_f32, m)?)?;
    m.add_function(wrap_pyfunction!(quantise, m)?)?;
    m.add_function(wrap_pyfunction!(top_i8, m)?)?;
    m.add_function(wrap_pyfunction!(mmr_order, m)?)?;
    Ok(())
}
