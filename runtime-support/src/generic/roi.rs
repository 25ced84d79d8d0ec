//! Pooling that scatters or samples at data-dependent places: MaxUnpool
//! (scatter through MaxPool's indices), RoiAlign (bilinear samples averaged
//! or maxed per bin) and MaxRoiPool (max over integer bins). Every index read
//! from a tensor is checked; a bad one returns `STATUS_INDEX_OUT_OF_RANGE`.

use super::{checked_rank, product};
use crate::abi::roi::*;
use crate::abi::{MAX_RANK, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK};

/// Does the work of the C entry point [`crate::abi::onnxc_max_unpool`].
pub(crate) unsafe fn max_unpool(p: *const UnpoolParams, x: *const u8, indices: *const i64, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(rank), Some(_)) = (checked_rank(p.rank, MAX_RANK, &p.dims), checked_rank(p.rank, MAX_RANK, &p.out_dims))
    else {
        return STATUS_INVALID_PARAMS;
    };
    if !matches!(p.elem_size, 1 | 2 | 4 | 8) || p.count < 0 || (0..rank).any(|d| p.dims[d] > p.out_dims[d]) {
        return STATUS_INVALID_PARAMS;
    }
    let (Some(total), Some(out_total)) = (product(&p.dims[..rank]), product(&p.out_dims[..rank])) else {
        return STATUS_INVALID_PARAMS;
    };
    let es = p.elem_size as usize;
    core::ptr::write_bytes(y, 0, out_total * es);
    for i in 0..p.count as usize {
        let idx = *indices.add(i);
        if idx < 0 || idx as u64 >= total as u64 {
            return STATUS_INDEX_OUT_OF_RANGE;
        }
        // Re-ravel the index from `dims` to `out_dims`.
        let mut rest = idx as usize;
        let mut at = 0usize;
        let mut stride = 1usize;
        for d in (0..rank).rev() {
            let dim = p.dims[d] as usize;
            at += (rest % dim) * stride;
            rest /= dim;
            stride *= p.out_dims[d] as usize;
        }
        core::ptr::copy_nonoverlapping(x.add(i * es), y.add(at * es), es);
    }
    STATUS_OK
}

impl RoiParams {
    fn valid(&self) -> bool {
        [self.batch, self.channels, self.height, self.width, self.num_rois, self.out_h, self.out_w, self.sampling_ratio]
            .iter()
            .all(|&v| v >= 0)
            && matches!(self.mode, ROI_AVG | ROI_MAX)
    }
}

/// One bilinear sample: four positions in the plane and their weights.
struct Sample {
    pos: [usize; 4],
    w: [f32; 4],
}

fn bilinear(y: f32, x: f32, h: usize, w: usize) -> Sample {
    if y < -1.0 || y > h as f32 || x < -1.0 || x > w as f32 || h == 0 || w == 0 {
        return Sample { pos: [0; 4], w: [0.0; 4] };
    }
    let (mut y, mut x) = (y.max(0.0), x.max(0.0));
    let (mut y0, mut x0) = (y as usize, x as usize);
    let y1 = if y0 >= h - 1 {
        y0 = h - 1;
        y = y0 as f32;
        y0
    } else {
        y0 + 1
    };
    let x1 = if x0 >= w - 1 {
        x0 = w - 1;
        x = x0 as f32;
        x0
    } else {
        x0 + 1
    };
    let (ly, lx) = (y - y0 as f32, x - x0 as f32);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    Sample { pos: [y0 * w + x0, y0 * w + x1, y1 * w + x0, y1 * w + x1], w: [hy * hx, hy * lx, ly * hx, ly * lx] }
}

/// The batch index of roi `n`, checked against the batch.
unsafe fn batch_of(index: i64, batch: i64) -> Option<usize> {
    (0..batch).contains(&index).then_some(index as usize)
}

/// Does the work of the C entry point [`crate::abi::onnxc_roi_align_f32`].
pub(crate) unsafe fn roi_align_f32(
    p: *const RoiParams,
    x: *const f32,
    rois: *const f32,
    batch_indices: *const i64,
    y: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref().filter(|p| p.valid()) else {
        return STATUS_INVALID_PARAMS;
    };
    let (c, h, w) = (p.channels as usize, p.height as usize, p.width as usize);
    let (oh, ow) = (p.out_h as usize, p.out_w as usize);
    let scale = p.spatial_scale as f32;
    let offset = if p.half_pixel != 0 { 0.5 } else { 0.0 };
    for n in 0..p.num_rois as usize {
        let Some(b) = batch_of(*batch_indices.add(n), p.batch) else {
            return STATUS_INDEX_OUT_OF_RANGE;
        };
        let r = rois.add(4 * n);
        let (x1, y1) = (*r * scale - offset, *r.add(1) * scale - offset);
        let (x2, y2) = (*r.add(2) * scale - offset, *r.add(3) * scale - offset);
        let (mut rw, mut rh) = (x2 - x1, y2 - y1);
        if p.half_pixel == 0 {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bin_h, bin_w) = (rh / oh.max(1) as f32, rw / ow.max(1) as f32);
        let grid = |extent: f32, out: usize| -> usize {
            if p.sampling_ratio > 0 {
                p.sampling_ratio as usize
            } else {
                libm::ceilf(extent / out.max(1) as f32) as usize
            }
        };
        let (gh, gw) = (grid(rh, oh), grid(rw, ow));
        let count = (gh * gw).max(1) as f32;
        for ch in 0..c {
            let plane = x.add((b * c + ch) * h * w);
            let out = y.add((n * c + ch) * oh * ow);
            for ph in 0..oh {
                for pw in 0..ow {
                    let mut acc = 0.0f32;
                    let mut first = true;
                    for iy in 0..gh {
                        let yy = y1 + ph as f32 * bin_h + (iy as f32 + 0.5) * bin_h / gh as f32;
                        for ix in 0..gw {
                            let xx = x1 + pw as f32 * bin_w + (ix as f32 + 0.5) * bin_w / gw as f32;
                            let s = bilinear(yy, xx, h, w);
                            let v: [f32; 4] = core::array::from_fn(|k| s.w[k] * *plane.add(s.pos[k]));
                            if p.mode == ROI_AVG {
                                acc += v[0] + v[1] + v[2] + v[3];
                            } else {
                                let m = v[0].max(v[1]).max(v[2]).max(v[3]);
                                acc = if first { m } else { acc.max(m) };
                                first = false;
                            }
                        }
                    }
                    *out.add(ph * ow + pw) = if p.mode == ROI_AVG { acc / count } else { acc };
                }
            }
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_max_roi_pool_f32`].
pub(crate) unsafe fn max_roi_pool_f32(p: *const RoiParams, x: *const f32, rois: *const f32, y: *mut f32) -> i32 {
    let Some(p) = p.as_ref().filter(|p| p.valid()) else {
        return STATUS_INVALID_PARAMS;
    };
    let (c, h, w) = (p.channels as usize, p.height as usize, p.width as usize);
    let (oh, ow) = (p.out_h as usize, p.out_w as usize);
    let scale = p.spatial_scale as f32;
    for n in 0..p.num_rois as usize {
        let r = rois.add(5 * n);
        let bf = *r;
        if !(bf >= 0.0 && bf < p.batch as f32) {
            return STATUS_INDEX_OUT_OF_RANGE;
        }
        let b = bf as usize;
        let round = |v: f32| libm::roundf(v * scale) as i64;
        let (x1, y1, x2, y2) = (round(*r.add(1)), round(*r.add(2)), round(*r.add(3)), round(*r.add(4)));
        let (rh, rw) = ((y2 - y1 + 1).max(1) as f32, (x2 - x1 + 1).max(1) as f32);
        let (bin_h, bin_w) = (rh / oh.max(1) as f32, rw / ow.max(1) as f32);
        let span = |i: usize, bin: f32, start: i64, limit: usize| -> (usize, usize) {
            let lo = libm::floorf(i as f32 * bin) as i64 + start;
            let hi = libm::ceilf((i + 1) as f32 * bin) as i64 + start;
            (lo.clamp(0, limit as i64) as usize, hi.clamp(0, limit as i64) as usize)
        };
        for ch in 0..c {
            let plane = x.add((b * c + ch) * h * w);
            let out = y.add((n * c + ch) * oh * ow);
            for ph in 0..oh {
                let (h0, h1) = span(ph, bin_h, y1, h);
                for pw in 0..ow {
                    let (w0, w1) = span(pw, bin_w, x1, w);
                    let mut m = f32::NEG_INFINITY;
                    for yy in h0..h1 {
                        for xx in w0..w1 {
                            m = m.max(*plane.add(yy * w + xx));
                        }
                    }
                    *out.add(ph * ow + pw) = if h0 >= h1 || w0 >= w1 { 0.0 } else { m };
                }
            }
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn unpool_scatters_and_checks_indices() {
        let mut p = UnpoolParams { rank: 2, count: 3, elem_size: 4, ..Default::default() };
        p.dims[..2].copy_from_slice(&[2, 2]);
        p.out_dims[..2].copy_from_slice(&[3, 3]);
        let x = [1.0f32, 2.0, 3.0];
        let idx = [0i64, 3, 2];
        let mut y = [9.0f32; 9];
        let st = unsafe { onnxc_max_unpool(&p, x.as_ptr() as *const u8, idx.as_ptr(), y.as_mut_ptr() as *mut u8) };
        assert_eq!(st, STATUS_OK);
        assert_eq!(y, [1.0, 0.0, 0.0, 3.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
        let bad = [0i64, 4, 1];
        let st = unsafe { onnxc_max_unpool(&p, x.as_ptr() as *const u8, bad.as_ptr(), y.as_mut_ptr() as *mut u8) };
        assert_eq!(st, STATUS_INDEX_OUT_OF_RANGE);
    }

    #[test]
    fn roi_align_averages_a_constant_plane() {
        // A constant image averages to the constant wherever samples land
        // inside; a bad batch index is rejected.
        let p = RoiParams {
            batch: 1,
            channels: 2,
            height: 4,
            width: 5,
            num_rois: 1,
            out_h: 2,
            out_w: 2,
            sampling_ratio: 2,
            mode: ROI_AVG,
            half_pixel: 1,
            spatial_scale: 1.0,
        };
        let x = [3.0f32; 40];
        let rois = [0.5f32, 0.5, 3.5, 2.5];
        let mut y = [0.0f32; 8];
        let st = unsafe { onnxc_roi_align_f32(&p, x.as_ptr(), rois.as_ptr(), [0i64].as_ptr(), y.as_mut_ptr()) };
        assert_eq!(st, STATUS_OK);
        assert!(y.iter().all(|&v| (v - 3.0).abs() < 1e-6), "{y:?}");
        let st = unsafe { onnxc_roi_align_f32(&p, x.as_ptr(), rois.as_ptr(), [1i64].as_ptr(), y.as_mut_ptr()) };
        assert_eq!(st, STATUS_INDEX_OUT_OF_RANGE);
    }

    #[test]
    fn max_roi_pool_bins() {
        let p = RoiParams {
            batch: 1,
            channels: 1,
            height: 3,
            width: 4,
            num_rois: 1,
            out_h: 1,
            out_w: 2,
            spatial_scale: 1.0,
            ..Default::default()
        };
        let x: std::vec::Vec<f32> = (0..12).map(|v| v as f32).collect();
        let rois = [0.0f32, 0.0, 0.0, 3.0, 1.0];
        let mut y = [0.0f32; 2];
        assert_eq!(unsafe { onnxc_max_roi_pool_f32(&p, x.as_ptr(), rois.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
        assert_eq!(y, [5.0, 7.0]);
    }
}
