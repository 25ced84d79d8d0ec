//! The fast path of [`crate::abi::onnxc_normalize`]: each statistics group
//! is one contiguous run of elements, as in LayerNormalization and
//! RMSNormalization over the last axes and Instance- and
//! GroupNormalization over whole spatial planes.
//!
//! The layout is read from the params, not from the operator: the
//! reduced dims (statistics stride 0) must be the trailing ones and the
//! kept dims must number the statistics in row-major order, so group `i`
//! is elements `i * block .. (i + 1) * block`. Along the last dim, scale
//! and bias must step by 1 (one value per element, LayerNorm) or 0 (one
//! value per row, InstanceNorm); their offsets over the outer dims come
//! from an odometer stepped once per row. Elements are f32 or f64 with the
//! scale and bias of the same type; any other case takes the general walk
//! in [`super::normalize`].
//!
//! Each group's statistics are sums in [`super::lanes::fold`]'s lanes of
//! the element type, taken over chunks of [`CHUNK`] elements whose totals
//! are added in f64, so rounding grows with the chunk, not the group. The
//! variance takes two passes: the mean (as the group's first element plus
//! the mean of the differences from it, which are small where the mean is
//! large), then the squares of the deviations from it, so a large mean
//! costs no precision. Each row is then one pass of
//! `(x - mean) * (factor * scale) + bias` in the element type (the mean in
//! two parts, see [`apply_row`]), the same expression for every element
//! wherever it falls in the vector loop. The loops run under
//! [`crate::isa::with_widest_vectors`].

use super::lanes::fold;
use super::normalize::{deviation_factor, size_factor, size_term, NormTensors};
use super::real::Real;
use super::{advance, to_isize, to_usize};
use crate::abi::norm::*;
use crate::abi::{ELEM_F32, ELEM_F64, MAX_RANK};

/// Elements whose lane sums are added into the f64 total at once.
const CHUNK: usize = 1024;

/// Where the groups, rows, scale and bias lie (see the module doc).
struct Runs {
    /// Elements per statistics group.
    block: usize,
    /// Elements per row (the last dim).
    row: usize,
    /// The dims before the last, and the scale and bias strides over them.
    outer: ([usize; MAX_RANK], [[isize; MAX_RANK]; 2], usize),
    /// Whether scale and bias hold one value per element of a row.
    per_element: [bool; 2],
}

/// Normalises as [`crate::abi::onnxc_normalize`] if the layout and element
/// types fit this path; `false` (nothing written) otherwise.
///
/// # Safety
/// As [`crate::abi::onnxc_normalize`], with `p` checked and `rank` its rank.
pub(crate) unsafe fn normalize(p: &NormParams, rank: usize, t: &NormTensors) -> bool {
    let same_elem = |ptr: *const u8, elem: i64| ptr.is_null() || elem == p.x_elem;
    if !same_elem(t.scale, p.scale_elem) || !same_elem(t.bias, p.bias_elem) {
        return false;
    }
    let Some(runs) = runs(p, rank, t) else {
        return false;
    };
    crate::isa::with_widest_vectors(
        #[inline(always)]
        || match p.x_elem {
            ELEM_F32 => normalize_runs::<f32>(p, &runs, t),
            ELEM_F64 => normalize_runs::<f64>(p, &runs, t),
            _ => false,
        },
    )
}

/// The layout of `p` if its groups are contiguous runs and scale and bias
/// step by 0 or 1 along the last dim.
fn runs(p: &NormParams, rank: usize, t: &NormTensors) -> Option<Runs> {
    let kept = p.stat_strides[..rank].iter().rposition(|&s| s != 0).map_or(0, |d| d + 1);
    if kept == rank {
        return None;
    }
    let mut next = 1i64;
    for d in (0..kept).rev() {
        if p.stat_strides[d] != next {
            return None;
        }
        next *= p.dims[d];
    }
    if next != p.stat_count {
        return None;
    }
    let step = |ptr: *const u8, strides: &[i64; MAX_RANK]| match (ptr.is_null(), strides[rank - 1]) {
        (true, _) | (false, 0) => Some(false),
        (false, 1) => Some(true),
        _ => None,
    };
    let per_element = [step(t.scale, &p.scale_strides)?, step(t.bias, &p.bias_strides)?];
    let dims = to_usize(&p.dims);
    let strides = [to_isize(&p.scale_strides), to_isize(&p.bias_strides)];
    Some(Runs {
        block: dims[kept..rank].iter().product(),
        row: dims[rank - 1],
        outer: (dims, strides, rank - 1),
        per_element,
    })
}

/// The contiguous path for element type `T`; always `true`.
#[inline(always)]
unsafe fn normalize_runs<T: Real>(p: &NormParams, runs: &Runs, t: &NormTensors) -> bool {
    let (x, y) = (t.x as *const T, t.y as *mut T);
    let (dims, strides, outer_rank) = &runs.outer;
    let mut idx = [0usize; MAX_RANK];
    let mut offs = [0isize; 2];
    let rows_per_block = runs.block / runs.row;
    for group in 0..p.stat_count as usize {
        let start = group * runs.block;
        let (shift, factor) = statistics(p, core::slice::from_raw_parts(x.add(start), runs.block));
        for r in 0..rows_per_block {
            let at = start + r * runs.row;
            let scale = Operand::new(t.scale as *const T, offs[0], runs.per_element[0], T::ONE);
            let bias = Operand::new(t.bias as *const T, offs[1], runs.per_element[1], T::ZERO);
            let coefficients = (split(shift), T::from_f64(factor));
            apply_row(x.add(at), y.add(at), runs.row, coefficients, scale, bias);
            advance(&mut idx[..*outer_rank], &dims[..*outer_rank], [&strides[0][..], &strides[1][..]], &mut offs);
        }
        t.store_stats(p, group, shift, factor);
    }
    true
}

/// `v` as the sum of two `T`s, the larger first.
#[inline(always)]
fn split<T: Real>(v: f64) -> (T, T) {
    let high = T::from_f64(v);
    (high, T::from_f64(v - high.to_f64()))
}

/// One group's shift (its mean, or 0) and factor, as the general walk
/// defines them.
#[inline(always)]
fn statistics<T: Real>(p: &NormParams, x: &[T]) -> (f64, f64) {
    let count = x.len() as f64;
    if !matches!(p.mode, NORM_STANDARD | NORM_MVN) {
        return (0.0, size_factor(p.mode, sum(x, |v| size_term(p.mode, v)), count, p.epsilon));
    }
    let first = x[0];
    let mean = first.to_f64() + sum(x, |v| v - first) / count;
    let centre = T::from_f64(mean);
    let var = sum(x, |v| (v - centre) * (v - centre)) / count;
    (mean, deviation_factor(p.mode, var, p.epsilon))
}

/// The sum of `map(v)` over `x`: lanes of `T` within each [`CHUNK`], the
/// chunks' totals added in f64.
#[inline(always)]
fn sum<T: Real>(x: &[T], map: impl Fn(T) -> T) -> f64 {
    x.chunks(CHUNK).map(|chunk| fold(chunk, T::ZERO, &map, |a, b| a + b).to_f64()).sum()
}

/// Scale or bias along one row: a value per element, or one for the row.
#[derive(Clone, Copy)]
enum Operand<T> {
    PerElement(*const T),
    PerRow(T),
}

impl<T: Real> Operand<T> {
    /// The operand at offset `at` of `ptr`, or `absent` where `ptr` is null.
    unsafe fn new(ptr: *const T, at: isize, per_element: bool, absent: T) -> Operand<T> {
        match (ptr.is_null(), per_element) {
            (true, _) => Operand::PerRow(absent),
            (false, true) => Operand::PerElement(ptr.offset(at)),
            (false, false) => Operand::PerRow(*ptr.offset(at)),
        }
    }
}

/// `y[j] = (x[j] - shift) * (factor * scale[j]) + bias[j]` over a row of
/// `len`, each pairing of the operands' forms as its own loop. The shift
/// comes as two parts, subtracted one after the other: `x - high` is
/// exact where `x` is near the mean, so a mean far larger than the
/// deviations costs no precision.
#[inline(always)]
unsafe fn apply_row<T: Real>(
    x: *const T,
    y: *mut T,
    len: usize,
    coefficients: ((T, T), T),
    scale: Operand<T>,
    bias: Operand<T>,
) {
    match (scale, bias) {
        (Operand::PerElement(s), Operand::PerElement(b)) => {
            apply(x, y, len, coefficients, |j| *s.add(j), |j| *b.add(j))
        }
        (Operand::PerElement(s), Operand::PerRow(b)) => apply(x, y, len, coefficients, |j| *s.add(j), |_| b),
        (Operand::PerRow(s), Operand::PerElement(b)) => apply(x, y, len, coefficients, |_| s, |j| *b.add(j)),
        (Operand::PerRow(s), Operand::PerRow(b)) => apply(x, y, len, coefficients, |_| s, |_| b),
    }
}

/// [`apply_row`]'s loop for one pairing of the operands' forms.
#[inline(always)]
unsafe fn apply<T: Real>(
    x: *const T,
    y: *mut T,
    len: usize,
    ((high, low), factor): ((T, T), T),
    scale: impl Fn(usize) -> T,
    bias: impl Fn(usize) -> T,
) {
    for j in 0..len {
        *y.add(j) = (*x.add(j) - high - low) * (factor * scale(j)) + bias(j);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::ELEM_F16;
    use crate::generic::normalize::walk_normalize;
    use crate::generic::test_util::{rand_vec, testable_isas, with_level};
    use crate::isa::Isa;
    use std::vec;
    use std::vec::Vec;

    /// A layout: dims, and the statistics, scale and bias strides.
    type Layout<'a> = (&'a [i64], &'a [i64], &'a [i64], &'a [i64]);

    /// LayerNorm rows (scale and bias per element), InstanceNorm planes
    /// (per row), GroupNorm groups of channels, a whole tensor, and the
    /// mixed pairings, over lengths of 1, odd, around the lane count and
    /// large.
    const LAYOUTS: &[Layout] = &[
        (&[3, 1], &[1, 0], &[0, 1], &[0, 1]),
        (&[2, 7], &[1, 0], &[0, 1], &[0, 1]),
        (&[3, 17], &[1, 0], &[0, 1], &[0, 0]),
        (&[2, 33], &[1, 0], &[0, 0], &[0, 1]),
        (&[4, 768], &[1, 0], &[0, 1], &[0, 1]),
        (&[5, 15], &[1, 0], &[1, 0], &[1, 0]),
        (&[2, 3, 1000], &[3, 1, 0], &[0, 1, 0], &[0, 1, 0]),
        (&[2, 4, 3, 31], &[4, 1, 0, 0], &[0, 3, 1, 0], &[0, 3, 1, 0]),
        (&[5000], &[0], &[1], &[0]),
    ];

    fn params(mode: i64, elem: i64, (dims, stat, scale, bias): Layout) -> NormParams {
        let rank = dims.len();
        let mut p = NormParams { mode, rank: rank as i64, epsilon: 1e-5, ..Default::default() };
        (p.x_elem, p.scale_elem, p.bias_elem, p.stat_elem) = (elem, elem, elem, ELEM_F32);
        p.dims[..rank].copy_from_slice(dims);
        p.stat_strides[..rank].copy_from_slice(stat);
        p.scale_strides[..rank].copy_from_slice(scale);
        p.bias_strides[..rank].copy_from_slice(bias);
        p.stat_count = (0..rank).filter(|&d| stat[d] != 0).map(|d| dims[d]).product();
        p
    }

    /// Elements of one affine operand: as many as its strides reach.
    fn operand_len(p: &NormParams, strides: &[i64; MAX_RANK]) -> usize {
        1 + (0..p.rank as usize).map(|d| (p.dims[d] - 1) * strides[d]).sum::<i64>() as usize
    }

    /// `y`, mean and factor by the contiguous path (`fast`) or the walk.
    fn run<T: Real + Default>(p: &NormParams, x: &[T], scale: &[T], bias: &[T], fast: bool) -> [Vec<f64>; 3] {
        let mut y = vec![T::default(); x.len()];
        let mut stats = [vec![0.0f32; p.stat_count as usize], vec![0.0f32; p.stat_count as usize]];
        let t = NormTensors {
            x: x.as_ptr() as *const u8,
            scale: scale.as_ptr() as *const u8,
            bias: bias.as_ptr() as *const u8,
            y: y.as_mut_ptr() as *mut u8,
            mean_out: stats[0].as_mut_ptr() as *mut u8,
            inv_out: stats[1].as_mut_ptr() as *mut u8,
        };
        let mut scratch = vec![0.0f64; 2 * p.stat_count as usize];
        unsafe {
            if fast {
                assert!(normalize(p, p.rank as usize, &t), "the layout should take the contiguous path");
            } else {
                walk_normalize(p, p.rank as usize, x.len(), &t, scratch.as_mut_ptr());
            }
        }
        let wide = |v: &[f32]| v.iter().map(|&s| s as f64).collect();
        [y.iter().map(|v| v.to_f64()).collect(), wide(&stats[0]), wide(&stats[1])]
    }

    /// The contiguous path against the walk, at every level this host
    /// runs, each level giving the same bits.
    fn check_layout<T: Real + Default>(p: &NormParams, offset: f64, tol: f64) {
        let x: Vec<T> = rand_vec(p.dims[..p.rank as usize].iter().product::<i64>() as usize, 5)
            .iter()
            .map(|&v| T::from_f64(v as f64 * 3.0 + offset))
            .collect();
        let affine =
            |strides, seed| rand_vec(operand_len(p, strides), seed).iter().map(|&v| T::from_f64(v as f64)).collect();
        let (scale, bias): (Vec<T>, Vec<T>) = (affine(&p.scale_strides, 6), affine(&p.bias_strides, 7));
        let want = run(p, &x, &scale, &bias, false);
        let levels: Vec<Isa> = testable_isas();
        let got: Vec<_> = levels.iter().map(|&level| with_level(level, || run(p, &x, &scale, &bias, true))).collect();
        for (level, bits) in levels.iter().zip(&got) {
            assert_eq!(bits, &got[0], "{} differs from {}", level.name(), levels[0].name());
        }
        for (what, (g, w)) in ["y", "mean", "factor"].iter().zip(got[0].iter().zip(&want)) {
            for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
                let ok = crate::tolerance::close(g, w, tol, tol);
                assert!(ok, "mode {} dims {:?} {what}[{i}]: {g} vs {w}", p.mode, &p.dims[..p.rank as usize]);
            }
        }
    }

    #[test]
    fn contiguous_path_matches_the_walk() {
        for &layout in LAYOUTS {
            for mode in NORM_STANDARD..=NORM_L2 {
                check_layout::<f32>(&params(mode, ELEM_F32, layout), 0.0, 1e-5);
                check_layout::<f64>(&params(mode, ELEM_F64, layout), 0.0, 1e-12);
            }
        }
    }

    /// A mean a thousand times the deviation, over rows longer than a
    /// chunk: the variance and each `x - mean` keep f32 precision.
    #[test]
    fn a_large_mean_does_not_cancel_the_variance() {
        for layout in [(&[2, 40000][..], &[1, 0][..], &[0, 1][..], &[0, 1][..]), LAYOUTS[6], LAYOUTS[8]] {
            for mode in [NORM_STANDARD, NORM_MVN] {
                check_layout::<f32>(&params(mode, ELEM_F32, layout), 3000.0, 1e-5);
            }
        }
    }

    /// f16 elements, and scale or bias of another type, take the walk.
    #[test]
    fn other_element_types_are_declined() {
        let null = core::ptr::null_mut();
        let x = [0u16; 4];
        let t =
            NormTensors { x: x.as_ptr() as *const u8, scale: null, bias: null, y: null, mean_out: null, inv_out: null };
        let p = params(NORM_STANDARD, ELEM_F16, LAYOUTS[1]);
        assert!(!unsafe { normalize(&p, 2, &t) });
        let mut p = params(NORM_STANDARD, ELEM_F32, LAYOUTS[1]);
        p.bias_elem = ELEM_F64;
        let t = NormTensors { bias: x.as_ptr() as *const u8, ..t };
        assert!(!unsafe { normalize(&p, 2, &t) });
    }
}
