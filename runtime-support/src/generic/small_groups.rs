//! Grouped 2-D convolutions of small groups (RegNet's 8-channel groups,
//! ResNeXt's, 8 groups of 32): every group in one pass, vectorised along
//! the output pixels.
//!
//! Through the gemm path each group is its own product: RegNet-Y-400MF's
//! last stage has 55 groups of `8 x 72 x 49`, and per group the im2col
//! packing and the driver's setup cost twelve times the arithmetic (its
//! grouped layers ran at 8 GFLOP/s, 45 % of the model's time).
//!
//! Here a group's input is copied, zero-padded, into a stack buffer as
//! `stride_h x stride_w` phase planes: plane `(a, b)` holds padded rows
//! `a, a + sh, ...` and columns `b, b + sw, ...`. In those planes every
//! kernel tap is one constant offset from the output index
//! `q = y * width + x`, where `width` (the planes' width) is the output's
//! plus the taps' reach, so `LANES` consecutive outputs are one unaligned load per tap and
//! input channel, whatever the stride and dilation. The `width - out_w`
//! columns past each output row are computed and dropped. The weights are
//! the convolution's packed A panels (8 output channels, depth-major, the
//! depth being channel, kernel row, kernel column): one broadcast per
//! channel and depth step, 8 accumulators per vector of outputs.
//!
//! Output rows go in bands that fit the buffer. Each output element is one
//! sum over the depth in order, so the bits do not depend on the bands or
//! on how images and groups are shared over threads; they are within
//! rounding of the gemm path's (another order of the sums).

use super::conv::{ConvFinish, ConvShape};
use super::conv_window::Window2d;
use super::gemm::PANEL_ROWS;
use super::prepacked::FinishRow;
use super::vector_math::MathLanes;
use crate::abi::conv::ConvParams;
use crate::isa::Isa;
use crate::parallel::Parallel;
use core::mem::MaybeUninit;

/// Floats of the per-task input buffer (64 KiB: stays in L2 with the
/// weights while a band's panels pass over it).
const BUFFER: usize = 16 * 1024;
/// Most depth steps (input channels of a group × taps).
pub const MAX_DEPTH: usize = 512;
/// Most output channels per group.
const MAX_GROUP_OUTPUTS: usize = 64;
/// Widest vector the buffer leaves room for past its last plane.
const MAX_LANES: usize = 16;

/// Where a group's planes, taps and output rows lie.
#[derive(Clone, Copy)]
struct Geometry {
    window: Window2d,
    /// Width of the phase planes (and of an output row as computed).
    width: usize,
    /// Plane rows past a band's output rows that its taps reach.
    extra_rows: usize,
    /// Output rows per band.
    band: usize,
}

impl Geometry {
    fn of(p: &ConvParams, s: &ConvShape) -> Option<Geometry> {
        let window = Window2d::of(p)?;
        let Window2d { kernel, strides, dilations, output, .. } = window;
        let reach = |d: usize| (kernel[d] - 1) * dilations[d] / strides[d];
        let width = output[1] + reach(1);
        let planes = s.c_per_group * strides[0] * strides[1];
        let fit = BUFFER.checked_sub(MAX_LANES + width)? / planes.checked_mul(width)?.max(1);
        let band = fit.checked_sub(reach(0)).filter(|&b| b >= 1)?.min(output[0]).max(1);
        Some(Geometry { window, width, extra_rows: reach(0), band })
    }

    fn plane_len(&self) -> usize {
        (self.band + self.extra_rows) * self.width
    }

    /// Writes each depth step's offset in the buffer into `table`.
    fn depth_offsets(&self, channels: usize, table: &mut [usize]) {
        let Window2d { kernel: [kh, kw], strides: [sh, sw], dilations: [dh, dw], .. } = self.window;
        let mut l = 0;
        for c in 0..channels {
            for ky in 0..kh {
                for kx in 0..kw {
                    let (ry, rx) = (ky * dh, kx * dw);
                    let plane = (c * sh + ry % sh) * sw + rx % sw;
                    table[l] = plane * self.plane_len() + ry / sh * self.width + rx / sw;
                    l += 1;
                }
            }
        }
    }

    /// Copies output rows `y0..` of the group's input `x` (channel planes
    /// of `in_h x in_w`) into the phase planes in `buf`, zero where the
    /// padding is, and zeroes the slack past the last plane.
    unsafe fn place(&self, channels: usize, y0: usize, x: *const f32, buf: &mut [MaybeUninit<f32>]) {
        let Window2d { strides: [sh, sw], input: [in_h, in_w], .. } = self.window;
        for c in 0..channels {
            for a in 0..sh {
                for b in 0..sw {
                    let plane = ((c * sh + a) * sw + b) * self.plane_len();
                    for r in 0..self.band + self.extra_rows {
                        let dst = &mut buf[plane + r * self.width..][..self.width];
                        let src_row = ((y0 + r) * sh + a).checked_sub(self.window.pads[0]).filter(|&y| y < in_h);
                        match src_row {
                            Some(y) => self.place_row(x.add((c * in_h + y) * in_w), b, dst),
                            None => dst.iter_mut().for_each(|v| _ = v.write(0.0)),
                        }
                    }
                }
            }
        }
        let end = channels * sh * sw * self.plane_len();
        buf[end..end + MAX_LANES + self.width].iter_mut().for_each(|v| _ = v.write(0.0));
    }

    /// Phase `b`'s columns of one padded input row `src`: `dst[col]` is
    /// padded column `col * stride_w + b`.
    unsafe fn place_row(&self, src: *const f32, b: usize, dst: &mut [MaybeUninit<f32>]) {
        let (sw, in_w, pad) = (self.window.strides[1], self.window.input[1], self.window.pads[1]);
        // Columns `lo..hi` fall inside the input row.
        let lo = pad.saturating_sub(b).div_ceil(sw).min(dst.len());
        let hi = (in_w + pad).saturating_sub(b).div_ceil(sw).clamp(lo, dst.len());
        dst[..lo].iter_mut().for_each(|v| _ = v.write(0.0));
        for (col, d) in (lo..hi).zip(&mut dst[lo..hi]) {
            d.write(*src.add(col * sw + b - pad));
        }
        dst[hi..].iter_mut().for_each(|v| _ = v.write(0.0));
    }
}

/// Whether [`conv`] takes this convolution: 2-D, not pointwise (a gemm per
/// group reads those in place), groups of more than one input channel
/// (depthwise layers have their own kernel), small enough
/// for the depth table and a band of at least one row.
pub(crate) fn takes(p: &ConvParams, s: &ConvShape) -> bool {
    s.rank == 2
        && p.group > 1
        && s.c_per_group > 1
        && !s.pointwise
        && s.c_per_group * s.taps <= MAX_DEPTH
        && s.m_per_group <= MAX_GROUP_OUTPUTS
        && Geometry::of(p, s).is_some()
}

/// The convolution of every image and group with `level`'s vectors: `w`
/// holds each group's weights packed as gemm A panels, `finish(n, g)`
/// gives the tail of group `g` of image `n` (its rows are the group's
/// output channels, its columns the output pixels). Images and groups are
/// shared over `parallel`, each run by the level's kernel
/// ([`crate::isa::choose::small_group`]).
///
/// # Safety
/// [`takes`] said so; the operands hold what `p` says.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv<'a>(
    level: Isa,
    p: &ConvParams,
    s: &ConvShape,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    finish: &dyn Fn(usize, usize) -> ConvFinish<'a>,
    parallel: *const Parallel,
) {
    let Some(geometry) = Geometry::of(p, s) else { return };
    let groups = p.group as usize;
    let kdim = s.c_per_group * s.taps;
    let per_group = s.m_per_group.div_ceil(PANEL_ROWS) * PANEL_ROWS * kdim;
    let mut table = [0usize; MAX_DEPTH];
    geometry.depth_offsets(s.c_per_group, &mut table);
    let table = &table[..kdim];
    Parallel::for_each(parallel, p.batch as usize * groups, |task| {
        let (n, g) = (task / groups, task % groups);
        let channel = n * p.out_channels as usize + g * s.m_per_group;
        let group = Group {
            geometry: &geometry,
            table,
            channels: s.c_per_group,
            outputs: s.m_per_group,
            x: x.add((n * p.in_channels as usize + g * s.c_per_group) * s.in_size),
            w: w.add(g * per_group),
            y: y.add(channel * s.out_size),
        };
        crate::isa::choose::small_group(level, &group, &finish(n, g));
    });
}

/// One group of one image.
pub(crate) struct Group<'g> {
    geometry: &'g Geometry,
    table: &'g [usize],
    channels: usize,
    outputs: usize,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
}

impl Group<'_> {
    /// The group's output, finished, with vectors `V`.
    ///
    /// # Safety
    /// The operands hold what the group's params say; `V`'s instructions
    /// are supported.
    #[inline(always)]
    pub(crate) unsafe fn run<V: MathLanes>(&self, finish: &ConvFinish) {
        let mut buf = [MaybeUninit::<f32>::uninit(); BUFFER];
        let g = self.geometry;
        let [out_h, out_w] = g.window.output;
        let out_size = out_h * out_w;
        for y0 in (0..out_h).step_by(g.band) {
            let rows = g.band.min(out_h - y0);
            g.place(self.channels, y0, self.x, &mut buf);
            let input = buf.as_ptr() as *const f32;
            for panel in 0..self.outputs.div_ceil(PANEL_ROWS) {
                let weights = self.w.add(panel * PANEL_ROWS * self.table.len());
                let first = panel * PANEL_ROWS;
                let live = PANEL_ROWS.min(self.outputs - first);
                for q in (0..rows * g.width).step_by(V::LANES) {
                    let sums = self.vector::<V>(input.add(q), weights);
                    self.store::<V>(&sums[..live], first, y0 * out_w, q, rows);
                }
                for i in first..first + live {
                    let row = core::slice::from_raw_parts_mut(self.y.add(i * out_size + y0 * out_w), rows * out_w);
                    finish.finish(i, y0 * out_w, row);
                }
            }
        }
    }

    /// The sums of `PANEL_ROWS` output channels over the `V::LANES`
    /// outputs from `input`.
    #[inline(always)]
    unsafe fn vector<V: MathLanes>(&self, input: *const f32, weights: *const f32) -> [V; PANEL_ROWS] {
        let mut sums = [V::splat(0.0); PANEL_ROWS];
        for (l, &offset) in self.table.iter().enumerate() {
            let v = V::load(input.add(offset));
            let w = weights.add(l * PANEL_ROWS);
            for (i, sum) in sums.iter_mut().enumerate() {
                *sum = V::mul_add(V::splat(*w.add(i)), v, *sum);
            }
        }
        sums
    }

    /// Stores the outputs at computed index `q..` of a band starting at
    /// pixel `pixel0` of `rows` rows, dropping the columns past a row and
    /// the indices past the band.
    #[inline(always)]
    unsafe fn store<V: MathLanes>(&self, sums: &[V], first: usize, pixel0: usize, q: usize, rows: usize) {
        let g = self.geometry;
        let [out_h, out_w] = g.window.output;
        let out_size = out_h * out_w;
        let mut lanes = [[0f32; MAX_LANES]; PANEL_ROWS];
        for (lane, &sum) in lanes.iter_mut().zip(sums) {
            V::store(lane.as_mut_ptr(), sum);
        }
        let (mut row, mut col, mut lane) = (q / g.width, q % g.width, 0);
        while lane < V::LANES && row < rows {
            let run = match col < out_w {
                true => (out_w - col).min(V::LANES - lane),
                false => (g.width - col).min(V::LANES - lane),
            };
            if col < out_w {
                for (i, values) in lanes[..sums.len()].iter().enumerate() {
                    let out = self.y.add((first + i) * out_size + pixel0 + row * out_w + col);
                    core::ptr::copy_nonoverlapping(values.as_ptr().add(lane), out, run);
                }
            }
            lane += run;
            col += run;
            if col == g.width {
                (row, col) = (row + 1, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::conv::onnxc_pack_conv_weights_f32;
    use crate::abi::conv::{onnxc_conv_f32, ConvParams, EPILOGUE_HARD_SWISH, EPILOGUE_NONE, EPILOGUE_RELU};
    use crate::abi::STATUS_OK;
    use crate::generic::conv::tests::{case2d, params};
    use crate::generic::conv::{conv_packed_weights_elems, conv_scratch_elems, validate};
    use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas, with_level};
    use std::vec;
    use std::vec::Vec;

    /// Against the im2col gemm on the unpacked weights, at every level the
    /// host has, serial and split over threads (the same bits): RegNet's
    /// 8-channel groups, stride 2 on 7x7, dilation with uneven padding and
    /// a part panel, a 5x5 window, several bands; with bias, a fused
    /// residual and activations.
    #[test]
    fn matches_the_gemm_path_at_every_level_and_split() {
        let cases = [
            case2d(16, 16, 2, (9, 11), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(32, 64, 8, (7, 7), (3, 3), 2, 1, [1, 1, 1, 1]),
            case2d(12, 18, 3, (10, 9), (3, 2), 2, 2, [0, 1, 2, 0]),
            case2d(16, 16, 4, (12, 13), (5, 5), 1, 1, [2, 2, 2, 2]),
            case2d(64, 64, 2, (40, 24), (3, 3), 1, 1, [1, 1, 1, 1]),
        ];
        for c in cases {
            let p = ConvParams { act_a: -0.25, act_b: 0.5, ..params(&c) };
            let s = validate(&p).unwrap();
            assert!(takes(&p, &s), "{:?} not taken", c.kernel);
            let x = rand_vec(c.batch * c.cin * c.input.iter().product::<usize>(), 1);
            let w = rand_vec(c.cout * (c.cin / c.group) * c.kernel.iter().product::<usize>(), 2);
            let bias = rand_vec(c.cout, 3);
            let out_n = c.batch * c.cout * s.out_size;
            let residual = rand_vec(out_n, 4);
            let packed_p = ConvParams { packed_weights: 1, ..p };
            let mut packed = vec![f32::NAN; conv_packed_weights_elems(&packed_p)];
            assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&packed_p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
            for (activation, fused_residual) in [(EPILOGUE_NONE, 0), (EPILOGUE_RELU, 1), (EPILOGUE_HARD_SWISH, 0)] {
                let run = |p: ConvParams, w: &[f32], parallel: &Parallel| {
                    let p = ConvParams { activation, residual: fused_residual, ..p };
                    let (mut y, mut scratch) = (vec![f32::NAN; out_n], vec![f32::NAN; conv_scratch_elems(&p)]);
                    let (xp, bp, rp) = (x.as_ptr(), bias.as_ptr(), residual.as_ptr());
                    let status = unsafe {
                        onnxc_conv_f32(&p, xp, w.as_ptr(), bp, rp, y.as_mut_ptr(), scratch.as_mut_ptr(), parallel)
                    };
                    assert_eq!(status, STATUS_OK);
                    y
                };
                let want = run(p, &w, &Parallel::SERIAL);
                let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
                for level in testable_isas() {
                    let (serial, split) = with_level(level, || {
                        (run(packed_p, &packed, &Parallel::SERIAL), run(packed_p, &packed, &threaded))
                    });
                    assert_close(&serial, &want, 1e-5);
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&serial), bits(&split), "{}: {:?} split", level.name(), c.kernel);
                }
            }
        }
    }

    #[test]
    fn depthwise_pointwise_and_wide_groups_are_left_to_the_other_paths() {
        let shapes = [
            case2d(8, 8, 8, (9, 9), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(16, 16, 2, (9, 9), (1, 1), 1, 1, [0, 0, 0, 0]),
            case2d(8, 264, 4, (9, 8), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(16, 16, 1, (9, 9), (3, 3), 1, 1, [1, 1, 1, 1]),
        ];
        for c in shapes {
            let p = params(&c);
            assert!(!takes(&p, &validate(&p).unwrap()), "{:?}", c.kernel);
        }
    }
}
