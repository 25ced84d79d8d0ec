//! Kernel entry points on random shapes against naive f64 references:
//! sgemm through every implementation this CPU has (generic, AVX2+FMA,
//! AVX-512) with random strides, transposes, alpha, beta and bias; Conv
//! (`onnxc_conv_f32`: im2col + gemm, groups, strides, dilations, pads) and
//! pooling (`onnxc_pool_f32`: max, average, Lp, ceil_mode). Buffers are
//! exactly as large as the params say, so ASan sees any access past them.

use crate::choices::{Choices, Rng};
use onnxc_runtime::{
    conv_scratch_elems, onnxc_conv_f32, onnxc_pool_f32, sgemm_with, ConvParams, Isa, MatMut, MatRef, PoolParams,
    MAX_RANK, POOL_AVERAGE, POOL_LP, POOL_MAX, STATUS_OK,
};

pub fn kernels(data: &[u8]) {
    let mut c = Choices::new(data);
    match c.below(3) {
        0 => gemm(&mut c),
        1 => conv(&mut c),
        _ => pool(&mut c),
    }
}

fn filled(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.next_f32()).collect()
}

/// Asserts `got` is `want` up to f32 rounding of a sum of `scale` magnitude.
fn close(what: &str, i: usize, got: f32, want: f64, scale: f64) {
    let ok = onnxc_runtime::tolerance::close(got as f64, want, 0.0, 1e-5 * scale.max(1.0) + 1e-6);
    assert!(ok, "{what}: element {i}: got {got}, want {want} (scale {scale})");
}

/// A strided `rows × cols` matrix view: (row stride, col stride, elements).
fn layout(c: &mut Choices, rows: usize, cols: usize) -> (isize, isize, usize) {
    let pad = c.below(3);
    if c.flag() {
        let rs = cols + pad;
        (rs as isize, 1, if rows == 0 { 0 } else { (rows - 1) * rs + cols })
    } else {
        let cs = rows + pad;
        (1, cs as isize, if cols == 0 { 0 } else { (cols - 1) * cs + rows })
    }
}

fn gemm(c: &mut Choices) {
    let big = c.below(8) == 0;
    let dim = |c: &mut Choices| if big { c.range(0, 150) } else { c.range(0, 24) };
    let (m, n, k) = (dim(c), dim(c), dim(c));
    let (alpha, beta) = (c.value(), c.value());
    let (ars, acs, alen) = layout(c, m, k);
    let (brs, bcs, blen) = layout(c, k, n);
    let bias = c.flag();
    // The bias broadcasts along rows, columns, or not at all.
    let (crs, ccs, clen) = match c.below(3) {
        0 => (n as isize, 1, m * n),
        1 => (0, 1, n),
        _ => (1, 0, m),
    };
    let mut rng = Rng::new(c.seed());
    let (a, b, cv) = (filled(&mut rng, alen), filled(&mut rng, blen), filled(&mut rng, clen));
    let at =
        |v: &[f32], rs: isize, cs: isize, i: usize, j: usize| v[(i as isize * rs + j as isize * cs) as usize] as f64;
    for kernel in Isa::ALL.into_iter().filter(|k| k.available()) {
        let mut y = vec![f32::NAN; m * n];
        let cref = bias.then_some(MatRef { ptr: cv.as_ptr(), rs: crs, cs: ccs });
        // SAFETY: every buffer holds exactly the elements its strides address.
        unsafe {
            sgemm_with(
                kernel,
                m,
                n,
                k,
                alpha,
                MatRef { ptr: a.as_ptr(), rs: ars, cs: acs },
                MatRef { ptr: b.as_ptr(), rs: brs, cs: bcs },
                beta,
                cref,
                MatMut { ptr: y.as_mut_ptr(), rs: n as isize, cs: 1 },
            )
        };
        for i in 0..m {
            for j in 0..n {
                let terms: Vec<f64> = (0..k).map(|l| at(&a, ars, acs, i, l) * at(&b, brs, bcs, l, j)).collect();
                let bias_v = if bias { beta as f64 * at(&cv, crs, ccs, i, j) } else { 0.0 };
                let want = alpha as f64 * terms.iter().sum::<f64>() + bias_v;
                let scale = (alpha as f64).abs() * terms.iter().map(|t| t.abs()).sum::<f64>() + bias_v.abs();
                close(kernel.name(), i * n + j, y[i * n + j], want, scale);
            }
        }
    }
}

/// Window geometry of one spatial dim: (in, kernel, stride, dilation, pad begin, pad end).
fn dims(c: &mut Choices, r: usize) -> Vec<(usize, usize, usize, usize, usize, usize)> {
    (0..r).map(|_| (c.range(1, 7), c.range(1, 3), c.range(1, 3), c.range(1, 2), c.below(3), c.below(3))).collect()
}

fn conv(c: &mut Choices) {
    let r = c.range(1, 3);
    let (batch, group) = (c.range(1, 2), c.range(1, 2));
    let (cg, mg) = (c.range(1, 3), c.range(1, 3));
    let geo = dims(c, r);
    let mut p = ConvParams {
        batch: batch as i64,
        in_channels: (cg * group) as i64,
        out_channels: (mg * group) as i64,
        group: group as i64,
        spatial_rank: r as i64,
        ..Default::default()
    };
    let mut out = Vec::new();
    for (d, &(x, k, s, dil, pb, pe)) in geo.iter().enumerate() {
        let span = (k - 1) * dil + 1;
        if x + pb + pe < span {
            return;
        }
        out.push((x + pb + pe - span) / s + 1);
        (p.in_spatial[d], p.kernel[d], p.strides[d], p.dilations[d], p.pads_begin[d]) =
            (x as i64, k as i64, s as i64, dil as i64, pb as i64);
        p.out_spatial[d] = out[d] as i64;
    }
    let size = |v: &[i64; MAX_RANK]| v[..r].iter().product::<i64>() as usize;
    let (in_size, out_size, taps) = (size(&p.in_spatial), size(&p.out_spatial), size(&p.kernel));
    let (cin, cout) = (cg * group, mg * group);
    let mut rng = Rng::new(c.seed());
    let x = filled(&mut rng, batch * cin * in_size);
    let w = filled(&mut rng, cout * cg * taps);
    let bias = filled(&mut rng, cout);
    let mut y = vec![f32::NAN; batch * cout * out_size];
    let mut scratch = vec![0f32; conv_scratch_elems(&p)];
    // SAFETY: buffers sized exactly by the params.
    let status = unsafe {
        onnxc_conv_f32(
            &p,
            x.as_ptr(),
            w.as_ptr(),
            bias.as_ptr(),
            core::ptr::null(),
            y.as_mut_ptr(),
            scratch.as_mut_ptr(),
            core::ptr::null(),
        )
    };
    assert_eq!(status, STATUS_OK, "{p:?}");
    for (o, &got) in y.iter().enumerate() {
        let (n, rest) = (o / (cout * out_size), o % (cout * out_size));
        let (m, pos) = (rest / out_size, rest % out_size);
        let g = m / mg;
        let opos = unravel(pos, &p.out_spatial[..r]);
        let (mut sum, mut scale) = (bias[m] as f64, (bias[m] as f64).abs());
        for ci in 0..cg {
            for t in 0..taps {
                let kpos = unravel(t, &p.kernel[..r]);
                let mut at = Some(0usize);
                for d in 0..r {
                    let i =
                        (opos[d] * p.strides[d] as usize + kpos[d] * p.dilations[d] as usize) as i64 - p.pads_begin[d];
                    at = at
                        .filter(|_| (0..p.in_spatial[d]).contains(&i))
                        .map(|a| a * p.in_spatial[d] as usize + i as usize);
                }
                if let Some(at) = at {
                    let xv = x[(n * cin + g * cg + ci) * in_size + at] as f64;
                    let wv = w[(m * cg + ci) * taps + t] as f64;
                    sum += xv * wv;
                    scale += (xv * wv).abs();
                }
            }
        }
        close("conv", o, got, sum, scale);
    }
}

/// Row-major multi-index of `flat` over `dims`.
fn unravel(mut flat: usize, dims: &[i64]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = flat % dims[d] as usize;
        flat /= dims[d] as usize;
    }
    idx
}

fn pool(c: &mut Choices) {
    let r = c.range(1, 3);
    let kind = *c.pick(&[POOL_MAX, POOL_AVERAGE, POOL_LP]);
    let ceil = kind != POOL_LP && c.flag();
    let mut p = PoolParams {
        kind,
        batch: c.range(1, 2) as i64,
        channels: c.range(1, 3) as i64,
        spatial_rank: r as i64,
        count_include_pad: c.flag() as i64,
        p_norm: 2.0,
        ..Default::default()
    };
    for (d, (x, k, s, dil, pb, pe)) in dims(c, r).into_iter().enumerate() {
        // Pads smaller than the kernel, as the spec requires.
        let (pb, pe) = (pb.min(k - 1), pe.min(k - 1));
        let span = (k - 1) * dil + 1;
        if x + pb + pe < span {
            return;
        }
        let mut o = (x + pb + pe - span) / s + 1;
        if ceil {
            o = (x + pb + pe - span).div_ceil(s) + 1;
            if (o - 1) * s >= x + pb {
                o -= 1;
            }
        }
        (p.in_spatial[d], p.out_spatial[d], p.kernel[d], p.strides[d], p.dilations[d]) =
            (x as i64, o as i64, k as i64, s as i64, dil as i64);
        (p.pads_begin[d], p.pads_end[d]) = (pb as i64, pe as i64);
    }
    let size = |v: &[i64; MAX_RANK]| v[..r].iter().product::<i64>() as usize;
    let (in_size, out_size, taps) = (size(&p.in_spatial), size(&p.out_spatial), size(&p.kernel));
    let planes = (p.batch * p.channels) as usize;
    let mut rng = Rng::new(c.seed());
    let x = filled(&mut rng, planes * in_size);
    let mut y = vec![f32::NAN; planes * out_size];
    let mut idx = vec![0i64; planes * out_size];
    let indices = if kind == POOL_MAX { idx.as_mut_ptr() } else { std::ptr::null_mut() };
    // SAFETY: buffers sized exactly by the params.
    let status = unsafe { onnxc_pool_f32(&p, x.as_ptr(), y.as_mut_ptr(), indices, core::ptr::null()) };
    assert_eq!(status, STATUS_OK, "{p:?}");
    for (o, &got) in y.iter().enumerate() {
        let (plane, pos) = (o / out_size, o % out_size);
        let opos = unravel(pos, &p.out_spatial[..r]);
        let (mut best, mut sum, mut valid, mut padded) = (f64::NEG_INFINITY, 0.0, 0usize, 0usize);
        for t in 0..taps {
            let kpos = unravel(t, &p.kernel[..r]);
            let mut at = Some(0usize);
            let mut in_pad = true;
            for d in 0..r {
                let i = (opos[d] * p.strides[d] as usize + kpos[d] * p.dilations[d] as usize) as i64 - p.pads_begin[d];
                in_pad &= i >= -p.pads_begin[d] && i < p.in_spatial[d] + p.pads_end[d];
                at =
                    at.filter(|_| (0..p.in_spatial[d]).contains(&i)).map(|a| a * p.in_spatial[d] as usize + i as usize);
            }
            padded += in_pad as usize;
            if let Some(at) = at {
                let v = x[plane * in_size + at] as f64;
                best = best.max(v);
                sum += if kind == POOL_LP { v * v } else { v };
                valid += 1;
            }
        }
        let want = match kind {
            POOL_MAX => best,
            POOL_AVERAGE => sum / if p.count_include_pad != 0 { padded } else { valid } as f64,
            _ => sum.sqrt(),
        };
        close("pool", o, got, want, want.abs() + 1.0);
    }
}
