//! The input of a 2-D convolution laid out for a direct kernel, which reads
//! each output pixel's receptive field in place rather than through an
//! im2col matrix ([`crate::isa::choose::direct_conv`]).
//!
//! A direct kernel computes depth step `l` (input channel `c`, kernel tap
//! `(ky, kx)`, in the order of the packed weights' depth) of output pixel
//! `p` from `x[corner(p) + offset[l]]`: one table of offsets for every
//! pixel. That needs every tap of every window to land inside `x`, so an
//! input with padding (or windows that reach past its end) is first copied
//! into a zero-padded buffer in the caller's scratch, just large enough
//! for the windows; an input without is read where it lies.
//!
//! A 1×1 window without padding (pointwise, or strided) reads one value
//! per input channel, from a different row of the input each step: far
//! more rows than the L1 holds with the weights. Its input is therefore
//! gathered into panels of [`PANEL_PIXELS`] pixels, channel-major
//! (`panel[c * PANEL_PIXELS + i]`), which the kernel reads in sequence.
//!
//! [`ConvWindow::of`] also decides which convolutions run direct: a
//! pointwise one only where the gemm's 24-column tiles would leave a ninth
//! of their columns empty, a stride-1 window only up to 3 MiB of output
//! (past that the gemm on the im2col matrix is faster).
//!
//! This part is target-independent: the compiler sizes the scratch with it
//! ([`super::conv::conv_scratch_elems`]) for whichever CPU will run the
//! object.

use super::conv::{ConvShape, CHANNEL_TASKS};
use crate::abi::conv::ConvParams;
use crate::parallel::{share, Parallel};
use core::mem::MaybeUninit;

/// Longest depth (input channels per group × taps) whose offset table a
/// direct kernel keeps on its stack.
pub const MAX_DIRECT_DEPTH: usize = 8192;

/// Output pixels per tile of the direct kernels, and per gathered panel.
pub const PANEL_PIXELS: usize = 4;

/// Where the direct kernel reads the input.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Placement {
    /// The input as it lies.
    InPlace,
    /// A zero-padded copy.
    Padded,
    /// Panels of [`PANEL_PIXELS`] pixels (1×1 windows without padding).
    Panels,
}

/// The sizes of a 2-D convolution's window, `[rows, columns]` each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window2d {
    pub input: [usize; 2],
    pub output: [usize; 2],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding before the first row and column.
    pub pads: [usize; 2],
}

impl Window2d {
    /// The first two spatial dims of `p` (`None` if any is negative).
    pub(crate) fn of(p: &ConvParams) -> Option<Window2d> {
        let dims = |v: &[i64]| Some([usize::try_from(v[0]).ok()?, usize::try_from(v[1]).ok()?]);
        Some(Window2d {
            input: dims(&p.in_spatial)?,
            output: dims(&p.out_spatial)?,
            kernel: dims(&p.kernel)?,
            strides: dims(&p.strides)?,
            dilations: dims(&p.dilations)?,
            pads: dims(&p.pads_begin)?,
        })
    }
}

/// One group's input as a direct kernel reads it (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct ConvWindow {
    channels: usize,
    window: Window2d,
    placement: Placement,
    /// Floats per row and per channel plane of the input as placed (for
    /// gathered panels, of the input they are gathered from).
    row_len: usize,
    plane: usize,
}

impl ConvWindow {
    /// The window of a 2-D convolution on packed weights, when its depth
    /// is not 0 (no input channels: the gemm path writes the bias), it
    /// and its offsets fit the direct kernels' table (`i32` byte offsets),
    /// and, for a pointwise convolution, the gemm's tiles fit its pixels
    /// badly ([`gemm_tiles_waste`]). The convolution takes the direct
    /// kernel exactly when this is `Some`, so its scratch is sized for it.
    pub(crate) fn of(p: &ConvParams, s: &ConvShape) -> Option<ConvWindow> {
        let depth = s.c_per_group * s.taps;
        if s.rank != 2 || p.packed_weights != 1 || depth == 0 || depth > MAX_DIRECT_DEPTH {
            return None;
        }
        if s.pointwise && !gemm_tiles_waste(s.out_size) {
            return None;
        }
        let window = Window2d::of(p)?;
        let mut w = ConvWindow { channels: s.c_per_group, window, placement: Placement::InPlace, row_len: 0, plane: 0 };
        let mut span = [0; 2];
        for (d, span) in span.iter_mut().enumerate() {
            // Rows (columns) from the first window's first to the last one's last.
            let reach = (window.output[d].max(1) - 1).checked_mul(window.strides[d])?;
            *span = reach.checked_add((window.kernel[d] - 1).checked_mul(window.dilations[d])?)? + 1;
        }
        if window.strides == [1, 1] && gemm_outruns_direct(s.m_per_group, w.pixels()) {
            return None;
        }
        let padded = (0..2).any(|d| window.pads[d] != 0 || span[d] > window.input[d]);
        w.placement = match (padded, s.taps) {
            (true, _) => Placement::Padded,
            (false, 1) => Placement::Panels,
            (false, _) => Placement::InPlace,
        };
        [w.row_len, w.plane] = if padded {
            [span[1], span[0].checked_mul(span[1])?]
        } else {
            [window.input[1], window.input[0] * window.input[1]]
        };
        // Both the placed input and the gathered panels stay within `i32`
        // byte offsets, so neither the table nor `scratch_elems` overflows.
        let panels = w.pixels().div_ceil(PANEL_PIXELS).checked_mul(PANEL_PIXELS)?;
        let bytes = w.channels.checked_mul(w.plane.max(panels))?.checked_mul(4)?;
        (bytes <= i32::MAX as usize).then_some(w)
    }

    /// Floats of scratch [`ConvWindow::place`] needs.
    pub(crate) fn scratch_elems(&self) -> usize {
        match self.placement {
            Placement::InPlace => 0,
            Placement::Padded => self.channels * self.plane,
            Placement::Panels => self.channels * self.pixels().next_multiple_of(PANEL_PIXELS),
        }
    }

    /// Output pixels.
    pub(crate) fn pixels(&self) -> usize {
        self.window.output[0] * self.window.output[1]
    }

    /// Depth of the product: input channels × taps.
    pub(crate) fn depth(&self) -> usize {
        self.channels * self.window.kernel[0] * self.window.kernel[1]
    }

    /// The group's input (`channels` planes at `x`) as the kernel reads it:
    /// `x` itself, or its zero-padded copy in `scratch`, the channels
    /// copied in parts over `parallel`.
    ///
    /// # Safety
    /// `x` holds the group's input planes; `scratch` holds
    /// [`ConvWindow::scratch_elems`] floats and overlaps nothing else;
    /// `parallel` as [`Parallel::for_each`].
    pub(crate) unsafe fn place(&self, x: *const f32, scratch: *mut f32, parallel: *const Parallel) -> *const f32 {
        match self.placement {
            Placement::InPlace => return x,
            Placement::Padded => {
                let parts = self.channels.min(CHANNEL_TASKS);
                Parallel::for_each(parallel, parts, |part| {
                    share(self.channels, parts, part).for_each(|c| self.place_channel(c, x, scratch))
                });
            }
            Placement::Panels => {
                let panels = self.pixels().div_ceil(PANEL_PIXELS);
                let parts = panels.min(CHANNEL_TASKS);
                Parallel::for_each(parallel, parts, |part| {
                    share(panels, parts, part).for_each(|t| self.gather_panel(t, x, scratch))
                });
            }
        }
        scratch
    }

    /// Panel `t` of [`ConvWindow::place`]'s gathered pixels: each
    /// channel's input under the panel's output pixels, zeros past the last.
    unsafe fn gather_panel(&self, t: usize, x: *const f32, scratch: *mut f32) {
        let n = self.pixels();
        let p0 = t * PANEL_PIXELS;
        let corners = self.input_corners::<PANEL_PIXELS>(p0, n - 1);
        let dst = core::slice::from_raw_parts_mut(scratch.add(p0 * self.channels), self.channels * PANEL_PIXELS);
        // Pointwise panels inside the output read consecutive input pixels.
        let consecutive = p0 + PANEL_PIXELS <= n && corners[PANEL_PIXELS - 1] == corners[0] + PANEL_PIXELS - 1;
        for (c, values) in dst.chunks_exact_mut(PANEL_PIXELS).enumerate() {
            let plane = x.add(c * self.plane);
            if consecutive {
                values.copy_from_slice(core::slice::from_raw_parts(plane.add(corners[0]), PANEL_PIXELS));
                continue;
            }
            for (i, v) in values.iter_mut().enumerate() {
                *v = if p0 + i < n { *plane.add(corners[i]) } else { 0.0 };
            }
        }
    }

    /// Channel `c` of [`ConvWindow::place`]'s padded copy.
    unsafe fn place_channel(&self, c: usize, x: *const f32, scratch: *mut f32) {
        let [in_h, in_w] = self.window.input;
        let rows = self.plane / self.row_len;
        // Columns `left..left + inside` of a padded row hold the input row.
        let left = self.window.pads[1].min(self.row_len);
        let inside = in_w.min(self.row_len - left);
        for r in 0..rows {
            let dst = core::slice::from_raw_parts_mut(scratch.add(c * self.plane + r * self.row_len), self.row_len);
            match r.checked_sub(self.window.pads[0]).filter(|&y| y < in_h) {
                Some(y) => {
                    let src = core::slice::from_raw_parts(x.add((c * in_h + y) * in_w), inside);
                    dst[..left].fill(0.0);
                    dst[left..left + inside].copy_from_slice(src);
                    dst[left + inside..].fill(0.0);
                }
                None => dst.fill(0.0),
            }
        }
    }

    /// Writes the byte offset of each depth step (channel, then kernel row,
    /// then kernel column) from a window's first element into `table`
    /// ([`ConvWindow::depth`] entries).
    pub(crate) fn tap_offsets(&self, table: &mut [MaybeUninit<i32>]) {
        if self.placement == Placement::Panels {
            for (l, entry) in table.iter_mut().enumerate() {
                entry.write((l * PANEL_PIXELS * 4) as i32);
            }
            return;
        }
        let [kh, kw] = self.window.kernel;
        let taps = (0..self.channels).flat_map(|c| (0..kh * kw).map(move |t| (c, t / kw, t % kw)));
        for (entry, (c, ky, kx)) in table.iter_mut().zip(taps) {
            let floats = c * self.plane + ky * self.window.dilations[0] * self.row_len + kx * self.window.dilations[1];
            // In range: `of` checked the whole input's bytes against i32.
            entry.write((floats * 4) as i32);
        }
    }

    /// The float offsets of the windows (their first taps) of output
    /// pixels `p0..p0 + N` in the input as placed, those past the last
    /// pixel `last` repeating its window. Gathered panels take `p0` a
    /// multiple of [`PANEL_PIXELS`] and `N` that.
    pub(crate) fn corners<const N: usize>(&self, p0: usize, last: usize) -> [usize; N] {
        if self.placement == Placement::Panels {
            return core::array::from_fn(|i| p0 * self.channels + i);
        }
        self.input_corners(p0, last)
    }

    /// [`ConvWindow::corners`] in the input itself, or its padded copy.
    fn input_corners<const N: usize>(&self, p0: usize, last: usize) -> [usize; N] {
        let (mut y, mut x) = (p0 / self.window.output[1], p0 % self.window.output[1]);
        let mut corner = y * self.window.strides[0] * self.row_len + x * self.window.strides[1];
        core::array::from_fn(|i| {
            let here = corner;
            if p0 + i < last {
                x += 1;
                if x == self.window.output[1] {
                    (x, y) = (0, y + 1);
                    corner = y * self.window.strides[0] * self.row_len;
                } else {
                    corner += self.window.strides[1];
                }
            }
            here
        })
    }
}

/// Whether the AVX2 gemm's 24-column tiles would leave a ninth of their
/// columns empty on `pixels` columns, so that a pointwise convolution runs
/// faster directly, in 4-pixel tiles (7×7 and 13×13 planes: 0.84 and 0.87
/// of the gemm's time). On whole tiles, or nearly (14×14 planes leave 20 of
/// 216 columns empty), the gemm wins, its stores needing no transposition
/// (a 56×56 plane: 1.05 its time direct; 14×14, 256 to 1024 channels and
/// ShuffleNet's 68 per group: 1.13 and 1.28).
fn gemm_tiles_waste(pixels: usize) -> bool {
    (pixels.div_ceil(24) * 24 - pixels) * 9 >= pixels
}

/// Whether a stride-1 window's output (`channels` rows of `pixels`) is
/// large enough that the gemm on its im2col matrix runs faster than the
/// direct kernel. Measured in pairs (alternate calls, one process): past
/// 3 MiB the gemm took 0.79 to 0.94 of the direct kernel's time (VGG-19's
/// layers on 224², 112² and 56² planes, 3 to 256 channels); at 2.4 MiB
/// (Inception's 64 to 192 channels on 56²) the two were even, and below
/// the direct kernel wins (ResNet-50's 64 channels on 56²: the gemm 1.07
/// to 1.10). Strided windows stay direct: the 7×7 stride-2 stem, with a
/// 3 MiB output, took 1.2 times as long through the gemm.
fn gemm_outruns_direct(channels: usize, pixels: usize) -> bool {
    channels.saturating_mul(pixels).saturating_mul(4) > 3 << 20
}
