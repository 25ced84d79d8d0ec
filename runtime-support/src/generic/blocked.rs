//! The blocked activation layout (NCHWc, 8 channels) and the convolution
//! that reads and writes it.
//!
//! In NCHW a convolution's tile of output channels × pixels is written a
//! row segment per channel, and each pixel's input comes from a different
//! plane per depth step. That access pattern, not the arithmetic, is what
//! holds an NCHW kernel back: on a Zen 3 core a plain NCHWc kernel ran
//! ResNet-50's 64 → 64 3×3 layer on 56² in 2.5-2.7 ms where the NCHW
//! direct kernel took 3.0-4.3 ms, the two alternated. In the blocked
//! layout a tensor `[N][C][H][W]` is stored `[N][C/8][H][W][8]`: the 8
//! channels of a block at one pixel are one ymm vector, so a tile's outputs
//! are whole-vector stores and its inputs consecutive broadcasts from one
//! line.
//!
//! The compiler chooses the layout once per graph (its `choose_layout`
//! pass): groups of convolutions, with the pools, channel Concats and
//! elementwise nodes between them, run blocked, with
//! [`onnxc_to_blocked_f32`](crate::abi::onnxc_to_blocked_f32) and [`onnxc_from_blocked_f32`](crate::abi::onnxc_from_blocked_f32) at their edges.
//! Only tensors whose channels are a multiple of 8 are blocked, so a block
//! never holds padding; a stem's image input of fewer than 8 channels is
//! read in NCHW ([`conv_reads_nchw`]). A grouped convolution whose groups
//! are whole blocks runs as one dense convolution per group ([`group_of`]).
//!
//! Weights are packed at compile time by [`onnxc_pack_conv_weights_blocked_f32`](crate::abi::onnxc_pack_conv_weights_blocked_f32)
//! as `[M/8][KH][KW][C/8][8 in][8 out]`: a tile walks one tap's input blocks
//! in sequence, and the 8 output channels of an input channel are one
//! vector. This module holds the reorders, the weight packing and the
//! convolution's portable loops (the reference the x86-64 kernels are
//! tested against, and the fallback); their C entry points are in
//! [`crate::abi::blocked`]. The x86-64 kernels
//! (AVX2's and AVX-512's tile sets) are `x86_64::blocked_conv`; the
//! reorders' 8×8 transposes are `x86_64::transpose`; 3×3 stride-1 layers
//! that keep their map's size may run as Winograd ([`super::winograd`]).
//! Results are within rounding of the NCHW convolution, not its bits (the
//! sums' order differs); max and average pooling of blocked values is
//! [`super::blocked_pool`].

use super::blocked_depthwise;
use super::conv::{activate_separately, epilogue, maps_lanes, validate};
use super::winograd::{self, conv_takes_winograd};
use crate::abi::conv::{ConvParams, EPILOGUE_NONE};
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// Channels per block.
pub const BLOCK: usize = 8;

/// Whether [`onnxc_conv_blocked_f32`](crate::abi::onnxc_conv_blocked_f32) takes these params: a 2-D
/// convolution of one group whose output channels are a multiple of
/// [`BLOCK`], and its input channels too, or fewer than a block (an
/// image: such an input is read in NCHW, see [`conv_reads_nchw`]); or a
/// depthwise one of whole blocks ([`super::blocked_depthwise`]).
/// Or a grouped one whose groups are whole blocks ([`group_of`]).
pub fn conv_takes_blocked(p: &ConvParams) -> bool {
    takes_ungrouped(p) || group_of(p).is_some_and(|g| takes_ungrouped(&g))
}

/// [`conv_takes_blocked`] for one group, or a depthwise convolution.
fn takes_ungrouped(p: &ConvParams) -> bool {
    let channels = p.in_channels as usize;
    let dense = p.group == 1
        && (channels.is_multiple_of(BLOCK) || channels < BLOCK)
        && (p.out_channels as usize).is_multiple_of(BLOCK);
    validate(p).is_some() && p.spatial_rank == 2 && (dense || blocked_depthwise::takes(p))
}

/// One group of a grouped convolution whose groups are whole blocks in
/// and out (RegNet's 8-channel groups, ResNeXt's 32): a dense convolution
/// of one image, from the group's input blocks to its output blocks,
/// which are contiguous in the blocked layout. [`conv_blocked_f32`] runs
/// the groups one after another; run as NCHW, each group's input had to
/// be gathered, and the layout changed around every such layer.
fn group_of(p: &ConvParams) -> Option<ConvParams> {
    let (c, m, g) = (p.in_channels, p.out_channels, p.group);
    let whole = |channels: i64| channels % g == 0 && ((channels / g) as usize).is_multiple_of(BLOCK);
    let grouped = g > 1 && !blocked_depthwise::takes(p) && whole(c) && whole(m);
    grouped.then(|| ConvParams { batch: 1, in_channels: c / g, out_channels: m / g, group: 1, ..*p })
}

/// Whether [`onnxc_conv_blocked_f32`](crate::abi::onnxc_conv_blocked_f32) reads its input in NCHW (fewer
/// channels than a block: the image a network's stem convolution reads,
/// which the blocked layout would pad) rather than blocked. Its output is
/// blocked either way.
pub fn conv_reads_nchw(p: &ConvParams) -> bool {
    (p.in_channels as usize) < BLOCK
}

/// Floats of the weights packed by [`onnxc_pack_conv_weights_blocked_f32`](crate::abi::onnxc_pack_conv_weights_blocked_f32)
/// (0 for params it does not take).
pub fn conv_blocked_weights_elems(p: &ConvParams) -> usize {
    if let Some(g) = group_of(p).filter(takes_ungrouped) {
        return p.group as usize * conv_blocked_weights_elems(&g);
    }
    match BlockedShape::of(p) {
        Some(s) if conv_takes_winograd(p) => winograd::weights_elems(&s),
        Some(_) => (p.out_channels * (p.in_channels / p.group) * p.kernel[0] * p.kernel[1]) as usize,
        None => 0,
    }
}

/// Floats of scratch [`onnxc_conv_blocked_f32`](crate::abi::onnxc_conv_blocked_f32) needs: for a layer run as
/// Winograd ([`super::winograd`]), or for the windows the AVX-512 kernels
/// gather ([`gathered_chunk`]); 0 otherwise.
pub fn conv_blocked_scratch_elems(p: &ConvParams) -> usize {
    if let Some(g) = group_of(p).filter(takes_ungrouped) {
        return conv_blocked_scratch_elems(&g);
    }
    match BlockedShape::of(p) {
        Some(s) if conv_takes_winograd(p) => winograd::scratch_elems(&s),
        Some(s) => gathered_chunk(&s).map_or(0, |chunk| GATHER_SLOTS * chunk * s.window()),
        None => 0,
    }
}

/// Chunks of gathered windows in scratch: tasks work in their own.
pub(crate) const GATHER_SLOTS: usize = 4;
/// Most floats of a chunk of gathered windows (256 KiB, within L2).
const GATHER_CHUNK_FLOATS: usize = 64 * 1024;
/// Pixels of the AVX-512 full-width pointwise tile, which gathered windows
/// run in (`x86_64::blocked_conv::full_width`).
pub(crate) const FULL_WIDTH_TILE_PIXELS: usize = 12;

/// Output pixels per chunk when the AVX-512 kernels run `s` on gathered
/// windows (`x86_64::blocked_conv::gathered`), or `None` for a layer they
/// leave to the tiles: dense, not 1×1, undilated (a dilated window on a
/// small map lies mostly in the padding, whose taps the tiles skip), read
/// blocked, of four output blocks or more (a full-width tile's), a map of
/// at least half a tile, and windows small enough that a chunk holds
/// [`GATHER_MIN_TILES`] tiles or the whole map (each chunk reads all the
/// weights). A chunk is whole tiles, unless the map is smaller.
pub(crate) fn gathered_chunk(s: &BlockedShape) -> Option<usize> {
    let pixels = s.out_h * s.out_w;
    let dense = !s.depthwise && !s.nchw_input && s.kernel != [1, 1] && s.dilations == [1, 1];
    if !dense || s.out_blocks < 4 || 2 * pixels < FULL_WIDTH_TILE_PIXELS {
        return None;
    }
    let tiles = GATHER_CHUNK_FLOATS / s.window() / FULL_WIDTH_TILE_PIXELS;
    let chunk = (tiles * FULL_WIDTH_TILE_PIXELS).min(pixels);
    (tiles >= GATHER_MIN_TILES || chunk == pixels).then_some(chunk).filter(|&c| c > 0)
}

/// Fewest tiles of a chunk of gathered windows that is not the whole map.
const GATHER_MIN_TILES: usize = 4;

/// The sizes of a blocked convolution, from params [`conv_takes_blocked`]
/// accepted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockedShape {
    pub batch: usize,
    pub in_channels: usize,
    /// Input channel blocks (0 when the input is NCHW), output channel blocks.
    pub in_blocks: usize,
    pub out_blocks: usize,
    /// The input is NCHW ([`conv_reads_nchw`]).
    pub nchw_input: bool,
    /// One channel per group ([`super::blocked_depthwise`]).
    pub depthwise: bool,
    pub in_h: usize,
    pub in_w: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    pub pads: [usize; 2],
}

impl BlockedShape {
    pub(crate) fn of(p: &ConvParams) -> Option<BlockedShape> {
        if !takes_ungrouped(p) {
            return None;
        }
        let pair = |v: &[i64]| [v[0] as usize, v[1] as usize];
        Some(BlockedShape {
            batch: p.batch as usize,
            in_channels: p.in_channels as usize,
            in_blocks: p.in_channels as usize / BLOCK,
            out_blocks: p.out_channels as usize / BLOCK,
            nchw_input: conv_reads_nchw(p),
            depthwise: p.group > 1,
            in_h: p.in_spatial[0] as usize,
            in_w: p.in_spatial[1] as usize,
            out_h: p.out_spatial[0] as usize,
            out_w: p.out_spatial[1] as usize,
            kernel: pair(&p.kernel),
            strides: pair(&p.strides),
            dilations: pair(&p.dilations),
            pads: pair(&p.pads_begin),
        })
    }

    /// Floats of one input image, and of one output image.
    pub(crate) fn in_image(&self) -> usize {
        self.in_channels * self.in_h * self.in_w
    }

    pub(crate) fn out_image(&self) -> usize {
        self.out_blocks * self.out_h * self.out_w * BLOCK
    }

    /// Floats of one output pixel's window over every input channel.
    pub(crate) fn window(&self) -> usize {
        self.kernel[0] * self.kernel[1] * self.in_channels
    }

    /// Floats of one output block's packed weights.
    pub(crate) fn weights_per_block(&self) -> usize {
        self.kernel[0] * self.kernel[1] * if self.depthwise { 1 } else { self.in_channels } * BLOCK
    }

    /// Float offset of input channel `c` at pixel `(iy, ix)` in an image.
    pub(crate) fn input_at(&self, c: usize, iy: usize, ix: usize) -> usize {
        let pixel = iy * self.in_w + ix;
        if self.nchw_input {
            c * self.in_h * self.in_w + pixel
        } else {
            ((c / BLOCK * self.in_h * self.in_w) + pixel) * BLOCK + c % BLOCK
        }
    }

    /// The kernel taps along `axis` whose input index, for output index
    /// `o`, falls inside the input (`len` long): `o * stride - pad + k * dilation`.
    pub(crate) fn taps(&self, axis: usize, o: usize, len: usize) -> core::ops::Range<usize> {
        let (s, d, pad, k) = (self.strides[axis], self.dilations[axis], self.pads[axis], self.kernel[axis]);
        let start = o * s;
        let first = pad.saturating_sub(start).div_ceil(d);
        // Taps with `start + k * d < len + pad`.
        let end = (len + pad).saturating_sub(start).div_ceil(d).min(k);
        first.min(end)..end
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_pack_conv_weights_blocked_f32`].
pub(crate) unsafe fn pack_conv_weights_blocked_f32(p: *const ConvParams, w: *const f32, packed: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if let Some(g) = group_of(p).filter(takes_ungrouped) {
        let (per_group, weights) = (conv_blocked_weights_elems(&g), (g.out_channels * g.in_channels) as usize);
        let weights = weights * (p.kernel[0] * p.kernel[1]) as usize;
        for group in 0..p.group as usize {
            let status = pack_conv_weights_blocked_f32(&g, w.add(group * weights), packed.add(group * per_group));
            if status != STATUS_OK {
                return status;
            }
        }
        return STATUS_OK;
    }
    let Some(s) = BlockedShape::of(p) else { return STATUS_INVALID_PARAMS };
    if conv_takes_winograd(p) {
        winograd::pack_weights(&s, w, packed);
        return STATUS_OK;
    }
    if s.depthwise {
        blocked_depthwise::pack_weights(&s, w, packed);
        return STATUS_OK;
    }
    let [kh, kw] = s.kernel;
    let c = s.in_channels;
    let mut out = packed;
    for mb in 0..s.out_blocks {
        for ky in 0..kh {
            for kx in 0..kw {
                for ci in 0..c {
                    for co in 0..BLOCK {
                        let m = mb * BLOCK + co;
                        *out = *w.add(((m * c + ci) * kh + ky) * kw + kx);
                        out = out.add(1);
                    }
                }
            }
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_conv_blocked_f32`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv_blocked_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.residual == 0 && !residual.is_null() || p.residual == 1 && residual.is_null() {
        return STATUS_INVALID_PARAMS;
    }
    if let Some(g) = group_of(p).filter(takes_ungrouped) {
        return conv_groups(p, &g, BlockedOperands { x, w, bias, residual, y }, scratch, parallel);
    }
    let Some(s) = BlockedShape::of(p) else { return STATUS_INVALID_PARAMS };
    let winograd = conv_takes_winograd(p);
    if winograd && scratch.is_null() {
        return STATUS_INVALID_PARAMS;
    }
    if s.batch * s.out_image() == 0 {
        return STATUS_OK;
    }
    let operands = BlockedOperands { x, w, bias, residual, y };
    // Sigmoid, Tanh and SiLU go over the finished output in a pass of their
    // own, at the widest vectors: applied per 8-channel tile vector they
    // cost more than the traffic they save (YOLO's SiLU 1x1 layers ran
    // 1.4-1.7x slower fused). The bits are the same either way.
    let separate = maps_lanes(p.activation);
    let tiles = if separate { &ConvParams { activation: EPILOGUE_NONE, ..*p } } else { p };
    if s.depthwise {
        blocked_depthwise::conv(crate::isa::Isa::best(), tiles, &s, operands, parallel);
    } else if !crate::isa::choose::blocked_conv(crate::isa::Isa::best(), tiles, &s, operands, scratch, parallel) {
        if winograd {
            let pointwise = |p: &ConvParams, s: &BlockedShape, o: BlockedOperands| conv_reference(p, s, o);
            winograd::conv(tiles, &s, operands, scratch, parallel, pointwise);
        } else {
            conv_reference(tiles, &s, operands);
        }
    }
    if separate {
        activate_separately(p, y, s.batch * s.out_image(), parallel);
    }
    STATUS_OK
}

/// [`conv_blocked_f32`] of a grouped convolution, group `g`'s params
/// ([`group_of`]) for each image and group in turn.
///
/// # Safety
/// As [`conv_blocked_f32`].
unsafe fn conv_groups(
    p: &ConvParams,
    g: &ConvParams,
    o: BlockedOperands,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    let plane = |d: &[i64; crate::abi::MAX_RANK]| (d[0] * d[1]) as usize;
    let (group_in, group_out) =
        (g.in_channels as usize * plane(&p.in_spatial), g.out_channels as usize * plane(&p.out_spatial));
    let weights = conv_blocked_weights_elems(g);
    let shift = |ptr: *const f32, by: usize| if ptr.is_null() { ptr } else { ptr.add(by) };
    for image in 0..p.batch as usize {
        for group in 0..p.group as usize {
            let unit = image * p.group as usize + group;
            let part = BlockedOperands {
                x: o.x.add(unit * group_in),
                w: o.w.add(group * weights),
                bias: shift(o.bias, group * g.out_channels as usize),
                residual: shift(o.residual, unit * group_out),
                y: o.y.add(unit * group_out),
            };
            let status = conv_blocked_f32(g, part.x, part.w, part.bias, part.residual, part.y, scratch, parallel);
            if status != STATUS_OK {
                return status;
            }
        }
    }
    STATUS_OK
}

/// The data of a blocked convolution call.
#[derive(Clone, Copy)]
pub(crate) struct BlockedOperands {
    pub x: *const f32,
    pub w: *const f32,
    pub bias: *const f32,
    pub residual: *const f32,
    pub y: *mut f32,
}

/// The portable blocked convolution: each output vector's sum over the
/// taps inside the input, then the epilogue.
///
/// # Safety
/// As [`onnxc_conv_blocked_f32`](crate::abi::onnxc_conv_blocked_f32), `s` from `p`.
pub(crate) unsafe fn conv_reference(p: &ConvParams, s: &BlockedShape, o: BlockedOperands) {
    let kw = s.kernel[1];
    for n in 0..s.batch {
        let x = o.x.add(n * s.in_image());
        for mb in 0..s.out_blocks {
            let w = o.w.add(mb * s.weights_per_block());
            for oy in 0..s.out_h {
                for ox in 0..s.out_w {
                    let mut acc = [0.0f32; BLOCK];
                    for ky in s.taps(0, oy, s.in_h) {
                        let iy = oy * s.strides[0] + ky * s.dilations[0] - s.pads[0];
                        for kx in s.taps(1, ox, s.in_w) {
                            let ix = ox * s.strides[1] + kx * s.dilations[1] - s.pads[1];
                            let taps = w.add((ky * kw + kx) * s.in_channels * BLOCK);
                            for c in 0..s.in_channels {
                                let (value, weights) = (*x.add(s.input_at(c, iy, ix)), taps.add(c * BLOCK));
                                for (co, a) in acc.iter_mut().enumerate() {
                                    *a += value * *weights.add(co);
                                }
                            }
                        }
                    }
                    let at = n * s.out_image() + ((mb * s.out_h + oy) * s.out_w + ox) * BLOCK;
                    let out = core::slice::from_raw_parts_mut(o.y.add(at), BLOCK);
                    finish_vector(p, o.bias, o.residual, at, mb, &acc, out);
                }
            }
        }
    }
}

/// Writes `out = activation((sums + bias) + residual)` for one output
/// vector at float `at` of output block `mb`: the NCHW epilogue's sums
/// lane by lane, then its activation on the whole vector.
///
/// # Safety
/// As [`onnxc_conv_blocked_f32`](crate::abi::onnxc_conv_blocked_f32); `at` is inside the output.
pub(crate) unsafe fn finish_vector(
    p: &ConvParams,
    bias: *const f32,
    residual: *const f32,
    at: usize,
    mb: usize,
    sums: &[f32; BLOCK],
    out: &mut [f32],
) {
    for (lane, (o, &v)) in out.iter_mut().zip(sums).enumerate() {
        let biased = if bias.is_null() { v } else { v + *bias.add(mb * BLOCK + lane) };
        *o = if residual.is_null() { biased } else { biased + *residual.add(at + lane) };
    }
    epilogue(p, None, None, out);
}

/// A reorder into the blocked layout or out of it, block by block: the
/// loops write `y` in sequence, reading the 8 planes of a block side by
/// side (into the layout) or the block's pixels once per channel (out of
/// it). With threads, a large reorder splits its blocks (and, when there
/// are few, their pixels in runs of 8) over [`REORDER_TASKS`] tasks.
pub(crate) unsafe fn reorder(
    x: *const f32,
    y: *mut f32,
    [batch, channels, pixels]: [i64; 3],
    into_blocked: bool,
    parallel: *const Parallel,
) -> i32 {
    let [Some(batch), Some(channels), Some(pixels)] = [batch, channels, pixels].map(|v| usize::try_from(v).ok()) else {
        return STATUS_INVALID_PARAMS;
    };
    if !channels.is_multiple_of(BLOCK) {
        return STATUS_INVALID_PARAMS;
    }
    let blocks = batch * channels / BLOCK;
    let threaded = Parallel::is_threaded(parallel) && blocks * BLOCK * pixels >= THREADED_REORDER_FLOATS;
    let parts = if threaded { REORDER_TASKS.div_ceil(blocks).min(pixels / BLOCK).max(1) } else { 1 };
    let units = blocks * parts;
    let tasks = if threaded { REORDER_TASKS.min(units) } else { 1 };
    Parallel::for_each(parallel, tasks, |task| {
        for unit in share(units, tasks, task) {
            let (block, part) = (unit / parts, unit % parts);
            let runs = share(pixels / BLOCK, parts, part);
            let end = if part + 1 == parts { pixels } else { runs.end * BLOCK };
            let offset = block * BLOCK * pixels;
            reorder_block(x.add(offset), y.add(offset), pixels, runs.start * BLOCK..end, into_blocked);
        }
    });
    STATUS_OK
}

/// Tasks a threaded reorder aims for.
const REORDER_TASKS: usize = 16;
/// Floats below which a reorder is not worth waking threads for.
const THREADED_REORDER_FLOATS: usize = 1 << 16;

/// Pixels `range` (starting at a multiple of 8) of one block of `pixels`.
unsafe fn reorder_block(src: *const f32, dst: *mut f32, pixels: usize, range: Range<usize>, into_blocked: bool) {
    // Channel `c` at pixel `i`: NCHW float `c * pixels + i`, blocked `i * 8 + c`.
    // Whole runs of 8 pixels are 8×8 transposes, where the CPU has one.
    let transpose = crate::isa::choose::transpose8x8();
    let runs = if transpose.is_some() { range.len() / BLOCK } else { 0 };
    if let Some(transpose8x8) = transpose {
        for run in 0..runs {
            let i = range.start + run * BLOCK;
            if into_blocked {
                transpose8x8(src.add(i), pixels, dst.add(i * BLOCK), BLOCK);
            } else {
                transpose8x8(src.add(i * BLOCK), BLOCK, dst.add(i), pixels);
            }
        }
    }
    let rest = range.start + runs * BLOCK..range.end;
    if into_blocked {
        for i in rest {
            (0..BLOCK).for_each(|c| *dst.add(i * BLOCK + c) = *src.add(c * pixels + i));
        }
    } else {
        for c in 0..BLOCK {
            rest.clone().for_each(|i| *dst.add(c * pixels + i) = *src.add(i * BLOCK + c));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::abi::blocked::*;
    use crate::abi::conv::{
        onnxc_conv_f32, EPILOGUE_CLIP, EPILOGUE_HARD_SIGMOID, EPILOGUE_HARD_SWISH, EPILOGUE_LEAKY_RELU, EPILOGUE_NONE,
        EPILOGUE_RELU, EPILOGUE_SIGMOID, EPILOGUE_SILU, EPILOGUE_TANH,
    };
    use crate::generic::test_util::{assert_close, rand_vec, reversed};
    use crate::isa::choose::blocked_conv;
    use crate::isa::Isa;
    use core::ptr::{null, null_mut};
    use std::vec;
    use std::vec::Vec;

    /// `(channels in, out, input h × w, kernel, stride, dilation, pads)`.
    pub(crate) type Case = (usize, usize, [usize; 2], [usize; 2], usize, usize, [usize; 2]);

    pub(crate) fn params(&(cin, cout, input, kernel, stride, dilation, pads): &Case) -> ConvParams {
        let mut p = ConvParams {
            batch: 2,
            in_channels: cin as i64,
            out_channels: cout as i64,
            group: 1,
            spatial_rank: 2,
            ..Default::default()
        };
        for d in 0..2 {
            p.in_spatial[d] = input[d] as i64;
            p.kernel[d] = kernel[d] as i64;
            p.strides[d] = stride as i64;
            p.dilations[d] = dilation as i64;
            p.pads_begin[d] = pads[d] as i64;
            let span = dilation * (kernel[d] - 1) + 1;
            p.out_spatial[d] = ((input[d] + 2 * pads[d] - span) / stride + 1) as i64;
        }
        p
    }

    pub(crate) fn blocked(x: &[f32], batch: usize, channels: usize) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        let pixels = x.len() / batch / channels;
        assert_eq!(
            unsafe {
                onnxc_to_blocked_f32(x.as_ptr(), y.as_mut_ptr(), batch as i64, channels as i64, pixels as i64, null())
            },
            STATUS_OK
        );
        y
    }

    pub(crate) fn unblocked(x: &[f32], batch: usize, channels: usize) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        let pixels = x.len() / batch / channels;
        assert_eq!(
            unsafe {
                onnxc_from_blocked_f32(x.as_ptr(), y.as_mut_ptr(), batch as i64, channels as i64, pixels as i64, null())
            },
            STATUS_OK
        );
        y
    }

    #[test]
    fn reorders_are_inverse_and_put_eight_channels_per_pixel() {
        let x: Vec<f32> = (0..2 * 16 * 3).map(|i| i as f32).collect();
        let y = blocked(&x, 2, 16);
        // Image 1, block 1, pixel 2, lane 5: channel 13 of image 1 at pixel 2.
        assert_eq!(y[((16 / 8 + 1) * 3 + 2) * 8 + 5], x[(16 + 13) * 3 + 2]);
        assert_eq!(unblocked(&y, 2, 16), x);
        // 19 pixels: two runs of 8 (transposed where the CPU can) and 3 more.
        let x: Vec<f32> = (0..2 * 16 * 19).map(|i| i as f32).collect();
        let y = blocked(&x, 2, 16);
        for (n, c, i) in (0..2).flat_map(|n| (0..16).flat_map(move |c| (0..19).map(move |i| (n, c, i)))) {
            assert_eq!(y[((n * 2 + c / 8) * 19 + i) * 8 + c % 8], x[(n * 16 + c) * 19 + i]);
        }
        assert_eq!(unblocked(&y, 2, 16), x);
        // Large enough to be threaded: blocks split into pixel ranges.
        let (channels, pixels) = (16, 2051);
        let x = rand_vec(2 * channels * pixels, 3);
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        let mut y = vec![0.0; x.len()];
        let mut back = vec![0.0; x.len()];
        unsafe {
            onnxc_to_blocked_f32(x.as_ptr(), y.as_mut_ptr(), 2, channels as i64, pixels as i64, &threaded);
            onnxc_from_blocked_f32(y.as_ptr(), back.as_mut_ptr(), 2, channels as i64, pixels as i64, &threaded);
        }
        assert_eq!(y, blocked(&x, 2, channels));
        assert_eq!(back, x);
        let mut out = vec![0.0; 12];
        assert_eq!(
            unsafe { onnxc_to_blocked_f32(x.as_ptr(), out.as_mut_ptr(), 1, 4, 3, null()) },
            STATUS_INVALID_PARAMS
        );
    }

    /// `out_len` floats of `onnxc_conv_f32(p)` on NCHW `x` (the reference
    /// of the blocked kernels' tests); `bias` and `residual` may be null.
    pub(crate) fn nchw_conv(
        p: &ConvParams,
        x: &[f32],
        w: &[f32],
        bias: *const f32,
        residual: *const f32,
        out_len: usize,
    ) -> Vec<f32> {
        let mut y = vec![0.0; out_len];
        let mut scratch = vec![0.0; crate::generic::conv::conv_scratch_elems(p)];
        let (x, w, out, scratch) = (x.as_ptr(), w.as_ptr(), y.as_mut_ptr(), scratch.as_mut_ptr());
        assert_eq!(unsafe { onnxc_conv_f32(p, x, w, bias, residual, out, scratch, null()) }, STATUS_OK);
        y
    }

    /// Grouped convolutions of whole blocks per group (RegNet's 8-channel
    /// groups at stride 2, two 16-channel groups of a 1×1, uneven in and
    /// out) through the NCHW kernel and, group by group, the blocked one,
    /// with a bias, a residual and an epilogue in and out of the tiles,
    /// serial and threaded.
    #[test]
    fn grouped_blocked_conv_matches_the_nchw_conv() {
        let cases: [(Case, i64); 3] = [
            ((48, 48, [14, 13], [3, 3], 2, 1, [1, 1]), 6),
            ((32, 32, [9, 7], [1, 1], 1, 1, [0, 0]), 2),
            ((24, 48, [7, 7], [3, 3], 1, 1, [1, 1]), 3),
        ];
        for (i, (case, group)) in cases.iter().enumerate() {
            let p = ConvParams { group: *group, residual: 1, ..params(case) };
            assert!(conv_takes_blocked(&p) && BlockedShape::of(&p).is_none(), "case {i}");
            let (cin, cout) = (case.0, case.1);
            let out_len = 2 * cout * (p.out_spatial[0] * p.out_spatial[1]) as usize;
            let x = rand_vec(2 * cin * case.2[0] * case.2[1], 40 + i as u64);
            let w = rand_vec(cout * cin / *group as usize * case.3[0] * case.3[1], 50 + i as u64);
            let (bias, residual) = (rand_vec(cout, 60 + i as u64), rand_vec(out_len, 70 + i as u64));
            let mut packed = vec![0.0; conv_blocked_weights_elems(&p)];
            assert_eq!(unsafe { onnxc_pack_conv_weights_blocked_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
            let (xb, rb) = (blocked(&x, 2, cin), blocked(&residual, 2, cout));
            let mut scratch = vec![f32::NAN; conv_blocked_scratch_elems(&p)];
            for activation in [EPILOGUE_RELU, EPILOGUE_SILU] {
                let p = ConvParams { activation, ..p };
                let want = nchw_conv(&p, &x, &w, bias.as_ptr(), residual.as_ptr(), out_len);
                let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
                let outputs: Vec<Vec<f32>> = [null(), &threaded as *const Parallel]
                    .into_iter()
                    .map(|parallel| {
                        let mut y = vec![f32::NAN; out_len];
                        let (xp, wp, bp, rp) = (xb.as_ptr(), packed.as_ptr(), bias.as_ptr(), rb.as_ptr());
                        let status = unsafe {
                            onnxc_conv_blocked_f32(&p, xp, wp, bp, rp, y.as_mut_ptr(), scratch.as_mut_ptr(), parallel)
                        };
                        assert_eq!(status, STATUS_OK, "case {i}");
                        assert_close(&unblocked(&y, 2, cout), &want, 1e-5);
                        y
                    })
                    .collect();
                assert_eq!(outputs[0], outputs[1], "case {i}: thread split changed the bits");
            }
        }
    }

    /// Every case through the NCHW kernel and through the blocked one
    /// (reordered in and out), with each epilogue, serial and threaded.
    #[test]
    fn blocked_conv_matches_the_nchw_conv() {
        // The last six read an NCHW input (fewer channels than a block);
        // the last four have stem runs in both tile sets (every block
        // group of a run's sizes), with columns left over, an odd channel
        // alone, a dilation.
        // Nine run as Winograd: the seventh (a 7×7 map) and the last eight,
        // the third and fourth last as F(4×4, 3×3), the others as F(2×2,
        // 3×3) (odd sides: tiles cut by the map's edge; the sixth last
        // splits its output channels in two groups); the last two are
        // unpadded (a map padded by a node of its own). After them, two
        // whose windows the AVX-512 kernels gather: three chunks at stride
        // 2, and a padded 5×5 window.
        let cases: [Case; 29] = [
            (8, 24, [9, 11], [3, 3], 1, 1, [1, 1]),
            (16, 64, [14, 13], [1, 1], 2, 1, [0, 0]),
            (8, 32, [28, 28], [1, 1], 2, 1, [0, 0]),
            (16, 80, [5, 9], [1, 1], 1, 1, [0, 0]),
            (16, 32, [7, 7], [1, 1], 1, 1, [0, 0]),
            (8, 40, [7, 7], [3, 3], 1, 1, [1, 1]),
            (16, 64, [7, 7], [3, 3], 1, 1, [1, 1]),
            (8, 56, [5, 14], [1, 1], 1, 1, [0, 0]),
            (16, 16, [10, 9], [3, 3], 2, 1, [1, 1]),
            (8, 8, [6, 13], [1, 1], 1, 1, [0, 0]),
            (24, 16, [12, 12], [1, 1], 2, 1, [0, 0]),
            (8, 16, [15, 14], [7, 7], 2, 1, [3, 3]),
            (16, 8, [9, 9], [3, 2], 1, 2, [2, 0]),
            (3, 16, [15, 14], [7, 7], 2, 1, [3, 3]),
            (1, 40, [9, 11], [3, 3], 1, 1, [1, 1]),
            (3, 32, [20, 31], [3, 3], 2, 1, [0, 0]),
            (3, 24, [17, 40], [3, 3], 2, 1, [1, 1]),
            (1, 64, [12, 21], [5, 5], 1, 1, [2, 2]),
            (2, 24, [10, 16], [3, 3], 1, 2, [2, 2]),
            (16, 24, [12, 13], [3, 3], 1, 1, [1, 1]),
            (32, 16, [16, 16], [3, 3], 1, 1, [1, 1]),
            (24, 40, [9, 15], [3, 3], 1, 1, [1, 1]),
            (16, 128, [16, 8], [3, 3], 1, 1, [1, 1]),
            (16, 24, [25, 23], [3, 3], 1, 1, [1, 1]),
            (24, 16, [30, 29], [3, 3], 1, 1, [1, 1]),
            (16, 24, [14, 15], [3, 3], 1, 1, [0, 0]),
            (16, 16, [34, 35], [3, 3], 1, 1, [0, 0]),
            (64, 32, [30, 29], [3, 3], 2, 1, [1, 1]),
            (16, 32, [13, 12], [5, 5], 1, 1, [2, 2]),
        ];
        for (i, case) in cases.iter().enumerate() {
            let p = params(case);
            // F(4×4, 3×3) rounds more (its transforms' coefficients reach 8
            // and 1/24): up to 5.1e-5 on these sums of 144-216 products,
            // where the other cases stay under 6e-6; the sums of 576
            // products of case 27 reach 3.4e-5 in every tile set.
            let tol = if (23..28).contains(&i) { 1e-4 } else { 1e-5 };
            let (cin, cout) = (case.0, case.1);
            let (in_len, out_len) =
                (2 * cin * case.2[0] * case.2[1], 2 * cout * (p.out_spatial[0] * p.out_spatial[1]) as usize);
            let x = rand_vec(in_len, i as u64);
            let w = rand_vec(cout * cin * case.3[0] * case.3[1], 10 + i as u64);
            let bias = rand_vec(cout, 20 + i as u64);
            let residual = rand_vec(out_len, 30 + i as u64);
            let mut packed = vec![0.0; conv_blocked_weights_elems(&p)];
            assert_eq!(unsafe { onnxc_pack_conv_weights_blocked_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
            assert_eq!(conv_takes_winograd(&p), i == 6 || (19..27).contains(&i), "case {i}");
            let gathered = BlockedShape::of(&p).and_then(|s| gathered_chunk(&s));
            assert_eq!(
                gathered.is_some_and(|chunk| chunk < p.out_spatial[0] as usize * p.out_spatial[1] as usize),
                i == 27,
                "case {i}"
            );
            let mut blocked_scratch = vec![f32::NAN; conv_blocked_scratch_elems(&p)];
            let blocked_scratch = blocked_scratch.as_mut_ptr();
            let xb = if conv_reads_nchw(&p) { x.clone() } else { blocked(&x, 2, cin) };
            let rb = blocked(&residual, 2, cout);
            for (activation, fused, biased) in [
                (EPILOGUE_NONE, 0, true),
                (EPILOGUE_RELU, 1, true),
                (EPILOGUE_LEAKY_RELU, 1, true),
                (EPILOGUE_HARD_SWISH, 0, true),
                (EPILOGUE_HARD_SWISH, 1, false),
                (EPILOGUE_HARD_SIGMOID, 1, true),
                (EPILOGUE_SIGMOID, 0, true),
                (EPILOGUE_TANH, 1, false),
                (EPILOGUE_CLIP, 1, false),
                (EPILOGUE_SILU, 1, true),
            ] {
                let p = ConvParams { activation, act_a: 0.1, act_b: 0.6, residual: fused, ..p };
                let bias = if biased { bias.as_ptr() } else { null() };
                let r = if fused == 1 { (residual.as_ptr(), rb.as_ptr()) } else { (null(), null()) };
                let want = nchw_conv(&p, &x, &w, bias, r.0, out_len);
                let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
                let mut outputs = Vec::new();
                for parallel in [null(), &threaded as *const Parallel] {
                    let mut y = vec![f32::NAN; out_len];
                    let status = unsafe {
                        onnxc_conv_blocked_f32(
                            &p,
                            xb.as_ptr(),
                            packed.as_ptr(),
                            bias,
                            r.1,
                            y.as_mut_ptr(),
                            blocked_scratch,
                            parallel,
                        )
                    };
                    assert_eq!(status, STATUS_OK);
                    assert_close(&unblocked(&y, 2, cout), &want, tol);
                    outputs.push(y);
                }
                assert_eq!(outputs[0], outputs[1], "case {i}: thread split changed the bits");
                let s = BlockedShape::of(&p).expect("blocked");
                for kernel in crate::generic::test_util::testable_isas().into_iter().filter(|&k| k != Isa::Generic) {
                    let mut outputs = Vec::new();
                    for parallel in [null(), &threaded as *const Parallel] {
                        let mut y = vec![f32::NAN; out_len];
                        let o = BlockedOperands {
                            x: xb.as_ptr(),
                            w: packed.as_ptr(),
                            bias,
                            residual: r.1,
                            y: y.as_mut_ptr(),
                        };
                        let simd = unsafe { blocked_conv(kernel, &p, &s, o, blocked_scratch, parallel) };
                        assert!(simd, "case {i}: {} took no SIMD kernel", kernel.name());
                        assert_close(&unblocked(&y, 2, cout), &want, tol);
                        outputs.push(y);
                    }
                    assert_eq!(outputs[0], outputs[1], "case {i}, {kernel:?}: thread split changed the bits");
                }
                let mut reference = vec![f32::NAN; out_len];
                let o = BlockedOperands {
                    x: xb.as_ptr(),
                    w: packed.as_ptr(),
                    bias,
                    residual: r.1,
                    y: reference.as_mut_ptr(),
                };
                if conv_takes_winograd(&p) {
                    let pointwise =
                        |p: &ConvParams, s: &BlockedShape, o: BlockedOperands| unsafe { conv_reference(p, s, o) };
                    unsafe { winograd::conv(&p, &s, o, blocked_scratch, null(), pointwise) };
                } else {
                    unsafe { conv_reference(&p, &s, o) };
                }
                assert_close(&unblocked(&reference, 2, cout), &want, tol);
            }
        }
    }

    /// Pointwise layers whose runs end in every way (pairs of full-width
    /// tiles, an odd tile left, a tail of pairs or a moved-back tile, block
    /// groups of 4 and fewer) get the same bits from every SIMD tile set,
    /// with each epilogue the runs have, serial and threaded.
    #[test]
    fn pointwise_runs_give_a_pixel_the_same_bits_in_every_tile_set() {
        let cases: [Case; 4] = [
            (16, 64, [14, 13], [1, 1], 1, 1, [0, 0]),
            (24, 32, [7, 11], [1, 1], 1, 1, [0, 0]),
            (8, 96, [9, 9], [1, 1], 1, 1, [0, 0]),
            (32, 48, [3, 17], [1, 1], 1, 1, [0, 0]),
        ];
        for (i, case) in cases.iter().enumerate() {
            let (cin, cout) = (case.0, case.1);
            let pixels = case.2[0] * case.2[1];
            let x = blocked(&rand_vec(2 * cin * pixels, 40 + i as u64), 2, cin);
            let w = rand_vec(cout * cin, 50 + i as u64);
            let bias = rand_vec(cout, 60 + i as u64);
            let residual = rand_vec(2 * cout * pixels, 70 + i as u64);
            for (activation, fused) in [(EPILOGUE_NONE, 0), (EPILOGUE_CLIP, 1), (EPILOGUE_RELU, 1)] {
                let p = ConvParams { activation, act_a: -0.5, act_b: 0.7, residual: fused, ..params(case) };
                let mut packed = vec![0.0; conv_blocked_weights_elems(&p)];
                assert_eq!(
                    unsafe { onnxc_pack_conv_weights_blocked_f32(&p, w.as_ptr(), packed.as_mut_ptr()) },
                    STATUS_OK
                );
                let s = BlockedShape::of(&p).expect("blocked");
                let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
                let mut outputs = Vec::new();
                for kernel in crate::generic::test_util::testable_isas().into_iter().filter(|&k| k != Isa::Generic) {
                    for parallel in [null(), &threaded as *const Parallel] {
                        let mut y = vec![f32::NAN; 2 * cout * pixels];
                        let residual = if fused == 1 { residual.as_ptr() } else { null() };
                        let o = BlockedOperands {
                            x: x.as_ptr(),
                            w: packed.as_ptr(),
                            bias: bias.as_ptr(),
                            residual,
                            y: y.as_mut_ptr(),
                        };
                        assert!(unsafe { blocked_conv(kernel, &p, &s, o, null_mut(), parallel) }, "case {i}");
                        outputs.push((kernel, y));
                    }
                }
                for (kernel, y) in &outputs[1..] {
                    assert!(y.iter().all(|v| !v.is_nan()), "case {i}, {kernel:?}: an output left unwritten");
                    let same = y.iter().zip(&outputs[0].1).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "case {i}, {kernel:?}: bits differ from {:?}'s", outputs[0].0);
                }
            }
        }
    }

    #[test]
    fn only_single_group_2d_convolutions_of_whole_blocks_or_images_are_taken() {
        let p = params(&(16, 8, [5, 5], [3, 3], 1, 1, [1, 1]));
        assert!(conv_takes_blocked(&p));
        assert!(!conv_takes_blocked(&ConvParams { in_channels: 12, ..p }));
        // An image's few channels are read in NCHW.
        assert!(
            conv_takes_blocked(&ConvParams { in_channels: 3, ..p })
                && conv_reads_nchw(&ConvParams { in_channels: 3, ..p })
        );
        assert!(!conv_reads_nchw(&p));
        assert!(!conv_takes_blocked(&ConvParams { group: 2, ..p }));
        assert!(!conv_takes_blocked(&ConvParams { spatial_rank: 1, ..p }));
        assert_eq!(conv_blocked_weights_elems(&ConvParams { out_channels: 4, ..p }), 0);
        let mut y = [0.0f32; 1];
        let status = unsafe {
            onnxc_conv_blocked_f32(
                &ConvParams { group: 2, ..p },
                null(),
                null(),
                null(),
                null(),
                y.as_mut_ptr(),
                null_mut(),
                null(),
            )
        };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }
}
