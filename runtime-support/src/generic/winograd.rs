//! Winograd's F(2×2, 3×3) for the blocked 3×3 stride-1 convolution.
//!
//! The direct kernels already run ResNet's and VGG's 3×3 layers near the
//! FMA peak, so the arithmetic itself has to shrink: a 2×2 output tile
//! reads a 4×4 input patch, and in the transformed domain
//! (`V = Bᵀ d B`, `U = G g Gᵀ`, `Y = Aᵀ (U ⊙ V) A`) its 36 multiply-adds
//! per input channel become 16. Summed over the input channels each of
//! the 16 transformed positions `ξ` is a matrix product — the tiles'
//! `V[ξ]` (channels × tiles) by the filters' `U[ξ]` — which is exactly a
//! pointwise convolution of a one-row "image" of tiles, in the blocked
//! layout. So a chunk of tiles runs in three passes through scratch:
//!
//! 1. the input transform writes `V[ξ]` (`[C/8][tiles][8]`) for the chunk,
//!    the padding read as zeros, vectorised across a block's 8 channels;
//! 2. for each `ξ` the caller's pointwise convolution (the fast blocked
//!    one, or the portable reference) makes `M[ξ] = U[ξ] · V[ξ]`;
//! 3. the output transform sums `M` back into 2×2 pixels and applies the
//!    epilogue (bias, residual, activation) as it stores them.
//!
//! `U` is computed at compile time by [`pack_weights`] (16/9 of the
//! direct weights), in the pointwise layout of each `ξ`. Chunks are sized
//! so that their `V` and `M` sit in a core's L2; each task has its own
//! part of the scratch and every output is computed by one chunk in one
//! order, so the result does not depend on the thread count. The sums'
//! order differs from the direct convolution's, so results are within
//! rounding of it (F(2×2, 3×3)'s transforms are exact in binary: sums and
//! halvings).

use super::blocked::{finish_vector, BlockedOperands, BlockedShape, BLOCK};
use super::conv::{tile_activation, ConvParams};
use crate::parallel::{share, Parallel};

/// Transformed positions per tile (a 4×4 patch).
const XI: usize = 16;
/// Bytes of a chunk's `V` and `M` together: about half a core's L2.
const CHUNK_BYTES: usize = 512 * 1024;
/// Most tasks a convolution is split into (each has a chunk of scratch).
const MAX_TASKS: usize = 4;
/// Fewest tiles per image for which the transforms pay: 7×7 maps (16
/// tiles) keep the direct kernel, whose weights are 9/16 the size.
const MIN_TILES: usize = 32;

/// Whether the blocked convolution `p` runs as Winograd F(2×2, 3×3): a
/// blocked 3×3 layer of stride 1 and dilation 1 that keeps the map's size
/// (padding 1), with at least 16 input and output channels, on a map of
/// at least [`MIN_TILES`] tiles.
pub fn conv_takes_winograd(p: &ConvParams) -> bool {
    let Some(s) = BlockedShape::of(p) else { return false };
    s.kernel == [3, 3]
        && s.strides == [1, 1]
        && s.dilations == [1, 1]
        && s.pads == [1, 1]
        && [s.out_h, s.out_w] == [s.in_h, s.in_w]
        && !s.nchw_input
        && s.in_channels >= 2 * BLOCK
        && s.out_blocks >= 2
        && Tiles::of(&s).count >= MIN_TILES
}

/// Floats of [`pack_weights`]' output.
pub(crate) fn weights_elems(s: &BlockedShape) -> usize {
    XI * s.in_channels * s.out_blocks * BLOCK
}

/// Floats of scratch [`conv`] needs for a layer of shape `s` it takes.
pub(crate) fn scratch_elems(s: &BlockedShape) -> usize {
    let plan = Plan::of(s);
    plan.tasks * plan.task_floats
}

/// The 2×2 output tiles of a map, row-major: `cols` to a row, `count` in all.
#[derive(Clone, Copy, Debug)]
struct Tiles {
    cols: usize,
    count: usize,
}

impl Tiles {
    fn of(s: &BlockedShape) -> Tiles {
        let cols = s.out_w.div_ceil(2);
        Tiles { cols, count: s.out_h.div_ceil(2) * cols }
    }
}

/// How [`conv`] cuts its work: chunks of at most `chunk` tiles (the
/// images' tiles in equal chunks), run by `tasks` tasks with
/// `task_floats` floats of scratch each.
#[derive(Clone, Copy, Debug)]
struct Plan {
    tiles: Tiles,
    chunks_per_image: usize,
    chunk: usize,
    tasks: usize,
    task_floats: usize,
}

impl Plan {
    fn of(s: &BlockedShape) -> Plan {
        let tiles = Tiles::of(s);
        let channels = s.in_channels + s.out_blocks * BLOCK;
        let most = (CHUNK_BYTES / (4 * XI * channels)).max(BLOCK);
        let chunks_per_image = tiles.count.div_ceil(most);
        let chunk = tiles.count.div_ceil(chunks_per_image);
        let tasks = (s.batch * chunks_per_image).min(MAX_TASKS);
        Plan { tiles, chunks_per_image, chunk, tasks, task_floats: XI * channels * chunk }
    }

    /// Tiles `range` of image `n`'s chunk `index`.
    fn chunk_tiles(&self, index: usize) -> core::ops::Range<usize> {
        let start = index * self.chunk;
        start..(start + self.chunk).min(self.tiles.count)
    }
}

/// Packs the ONNX weights `w` (`[M][C][3][3]`) as `U = G g Gᵀ` for each
/// output and input channel, stored per `ξ` in the blocked pointwise
/// layout `[ξ][M/8][C][8 out]` (the layout [`onnxc_pack_conv_weights_blocked_f32`]
/// gives a 1×1 convolution). Computed in f64 and rounded once.
///
/// [`onnxc_pack_conv_weights_blocked_f32`]: super::blocked::onnxc_pack_conv_weights_blocked_f32
///
/// # Safety
/// `w` holds the weights of `s`, `packed` [`weights_elems`] floats.
pub(crate) unsafe fn pack_weights(s: &BlockedShape, w: *const f32, packed: *mut f32) {
    const G: [[f64; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];
    let (c, m) = (s.in_channels, s.out_blocks * BLOCK);
    for oc in 0..m {
        for ic in 0..c {
            let g = |ky: usize, kx: usize| *w.add(((oc * c + ic) * 3 + ky) * 3 + kx) as f64;
            // G g, then (G g) Gᵀ.
            let gg: [[f64; 3]; 4] =
                core::array::from_fn(|r| core::array::from_fn(|kx| (0..3).map(|ky| G[r][ky] * g(ky, kx)).sum()));
            for (r, gg_row) in gg.iter().enumerate() {
                for (q, g_row) in G.iter().enumerate() {
                    let u: f64 = gg_row.iter().zip(g_row).map(|(a, b)| a * b).sum();
                    let at = (((r * 4 + q) * (m / BLOCK) + oc / BLOCK) * c + ic) * BLOCK + oc % BLOCK;
                    *packed.add(at) = u as f32;
                }
            }
        }
    }
}

/// Tasks [`conv`] splits `s` into (each with its part of the scratch).
pub(crate) fn tasks(s: &BlockedShape) -> usize {
    Plan::of(s).tasks
}

/// The convolution `p` (shape `s`, weights packed by [`pack_weights`]),
/// its [`tasks`] run through `parallel`, with `pointwise` (see [`run_task`]).
///
/// # Safety
/// As [`run_task`].
pub(crate) unsafe fn conv<P: Fn(&ConvParams, &BlockedShape, BlockedOperands)>(
    p: &ConvParams,
    s: &BlockedShape,
    o: BlockedOperands,
    scratch: *mut f32,
    parallel: *const Parallel,
    pointwise: P,
) {
    Parallel::for_each(parallel, tasks(s), |task| run_task(p, s, &o, scratch, task, &pointwise));
}

/// Task `task` of the convolution `p` (shape `s`, weights packed by
/// [`pack_weights`]): its chunks of tiles, `pointwise(params, shape,
/// operands)` computing each `M[ξ] = U[ξ] · V[ξ]` (a blocked 1×1
/// convolution, single-threaded). Inlined into each caller, so that the
/// transforms are compiled for its instruction set.
///
/// # Safety
/// As [`super::blocked::onnxc_conv_blocked_f32`]; `scratch` holds
/// [`scratch_elems`] floats, of which no other running task
/// uses this task's part; `pointwise` computes the blocked convolution
/// it is given.
#[inline(always)]
pub(crate) unsafe fn run_task<P: Fn(&ConvParams, &BlockedShape, BlockedOperands)>(
    p: &ConvParams,
    s: &BlockedShape,
    o: &BlockedOperands,
    scratch: *mut f32,
    task: usize,
    pointwise: &P,
) {
    let plan = Plan::of(s);
    let scratch = scratch.add(task * plan.task_floats);
    for chunk in share(s.batch * plan.chunks_per_image, plan.tasks, task) {
        let (n, index) = (chunk / plan.chunks_per_image, chunk % plan.chunks_per_image);
        run_chunk(p, s, o, &plan, n, plan.chunk_tiles(index), scratch, pointwise);
    }
}

/// One chunk of tiles of image `n`: the three passes of the module doc.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run_chunk<P: Fn(&ConvParams, &BlockedShape, BlockedOperands)>(
    p: &ConvParams,
    s: &BlockedShape,
    o: &BlockedOperands,
    plan: &Plan,
    n: usize,
    tiles: core::ops::Range<usize>,
    scratch: *mut f32,
    pointwise: &P,
) {
    let count = tiles.len();
    let out_channels = s.out_blocks * BLOCK;
    // Per ξ: floats of U, of the chunk's V and of its M.
    let (u_len, v_len, m_len) = (out_channels * s.in_channels, s.in_channels * count, out_channels * count);
    let (v, m) = (scratch, scratch.add(XI * v_len));
    let x = o.x.add(n * s.in_image());
    for ib in 0..s.in_blocks {
        let plane = x.add(ib * s.in_h * s.in_w * BLOCK);
        for (t, tile) in tiles.clone().enumerate() {
            let (ty, tx) = (tile / plan.tiles.cols, tile % plan.tiles.cols);
            let mut patch = [[0.0f32; BLOCK]; XI];
            input_patch(s, plane, ty, tx, &mut patch);
            let out = v.add((ib * count + t) * BLOCK);
            input_transform(&patch, out, v_len);
        }
    }
    // One ξ: a pointwise convolution of a 1 × `count` image.
    let mut one = ConvParams { batch: 1, group: 1, spatial_rank: 2, ..*p };
    one.in_spatial[..2].copy_from_slice(&[1, count as i64]);
    one.out_spatial[..2].copy_from_slice(&[1, count as i64]);
    one.kernel[..2].copy_from_slice(&[1, 1]);
    one.pads_begin[..2].copy_from_slice(&[0, 0]);
    (one.activation, one.residual) = (0, 0);
    // `s` with the map replaced (its strides and dilations are already 1).
    let one_shape =
        BlockedShape { batch: 1, in_h: 1, in_w: count, out_h: 1, out_w: count, kernel: [1, 1], pads: [0, 0], ..*s };
    for xi in 0..XI {
        let operands = BlockedOperands {
            x: v.add(xi * v_len),
            w: o.w.add(xi * u_len),
            bias: core::ptr::null(),
            residual: core::ptr::null(),
            y: m.add(xi * m_len),
        };
        pointwise(&one, &one_shape, operands);
    }
    let activation = tile_activation(p);
    for ob in 0..s.out_blocks {
        for (t, tile) in tiles.clone().enumerate() {
            let mut pixels = [[0.0f32; BLOCK]; 4];
            output_transform(m.add((ob * count + t) * BLOCK), m_len, &mut pixels);
            let (ty, tx) = (tile / plan.tiles.cols, tile % plan.tiles.cols);
            for (k, pixel) in pixels.iter().enumerate() {
                let (oy, ox) = (2 * ty + k / 2, 2 * tx + k % 2);
                if oy < s.out_h && ox < s.out_w {
                    let at = n * s.out_image() + ((ob * s.out_h + oy) * s.out_w + ox) * BLOCK;
                    let out = &mut *(o.y.add(at) as *mut [f32; BLOCK]);
                    match activation {
                        Some(act) => finish_lanes(o, at, ob, act, pixel, out),
                        None => finish_vector(p, o.bias, o.residual, at, ob, pixel, out),
                    }
                }
            }
        }
    }
}

/// `out = act((sums + bias) + residual)` on a vector's lanes, written so
/// that it vectorises: [`finish_vector`]'s arithmetic for the activations
/// that are a compare and a select.
#[inline(always)]
unsafe fn finish_lanes(
    o: &BlockedOperands,
    at: usize,
    ob: usize,
    activation: super::prepacked::TileActivation,
    sums: &[f32; BLOCK],
    out: &mut [f32; BLOCK],
) {
    let mut v = *sums;
    if !o.bias.is_null() {
        let bias = &*(o.bias.add(ob * BLOCK) as *const [f32; BLOCK]);
        v.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
    if !o.residual.is_null() {
        let residual = &*(o.residual.add(at) as *const [f32; BLOCK]);
        v.iter_mut().zip(residual).for_each(|(v, r)| *v += r);
    }
    for (o, v) in out.iter_mut().zip(v) {
        *o = activation.apply(v);
    }
}

/// The 4×4 input patch of tile `(ty, tx)` in one channel block `x`
/// (`[in_h][in_w][8]`) into `patch` (`4r + q`), rows and columns from
/// `2ty - 1` and `2tx - 1`; taps outside the map stay zero.
#[inline(always)]
unsafe fn input_patch(s: &BlockedShape, x: *const f32, ty: usize, tx: usize, patch: &mut [[f32; BLOCK]; XI]) {
    for r in 0..4 {
        let iy = (2 * ty + r).wrapping_sub(1);
        if iy >= s.in_h {
            continue;
        }
        for q in 0..4 {
            let ix = (2 * tx + q).wrapping_sub(1);
            if ix < s.in_w {
                patch[4 * r + q] = *(x.add((iy * s.in_w + ix) * BLOCK) as *const [f32; BLOCK]);
            }
        }
    }
}

/// `Bᵀ` on the four vectors `d[at + k * step]` (`k` = 0..4), in place,
/// `Bᵀ = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]`.
#[inline(always)]
fn input_rows(d: &mut [[f32; BLOCK]; XI], at: usize, step: usize) {
    let [a, b, c, e] = [d[at], d[at + step], d[at + 2 * step], d[at + 3 * step]];
    for l in 0..BLOCK {
        d[at][l] = a[l] - c[l];
        d[at + step][l] = b[l] + c[l];
        d[at + 2 * step][l] = c[l] - b[l];
        d[at + 3 * step][l] = b[l] - e[l];
    }
}

/// `V = Bᵀ d B` of a patch (`4r + q`), vector `ξ` stored at `out + ξ * stride`.
#[inline(always)]
unsafe fn input_transform(patch: &[[f32; BLOCK]; XI], out: *mut f32, stride: usize) {
    let mut d = *patch;
    for q in 0..4 {
        input_rows(&mut d, q, 4);
    }
    for r in 0..4 {
        input_rows(&mut d, 4 * r, 1);
    }
    for (xi, vector) in d.iter().enumerate() {
        *(out.add(xi * stride) as *mut [f32; BLOCK]) = *vector;
    }
}

/// `Y = Aᵀ M A` from the 16 products at `m + ξ * stride` into the 2×2
/// `pixels` (`2i + j`), `Aᵀ = [[1,1,1,0],[0,1,-1,-1]]` on each axis.
#[inline(always)]
unsafe fn output_transform(m: *const f32, stride: usize, pixels: &mut [[f32; BLOCK]; 4]) {
    let at = |xi: usize| &*(m.add(xi * stride) as *const [f32; BLOCK]);
    // Aᵀ M: two rows of four.
    let mut rows = [[0.0f32; BLOCK]; 8];
    for q in 0..4 {
        let [a, b, c, d] = [at(q), at(4 + q), at(8 + q), at(12 + q)];
        for l in 0..BLOCK {
            rows[q][l] = a[l] + b[l] + c[l];
            rows[4 + q][l] = b[l] - c[l] - d[l];
        }
    }
    for i in 0..2 {
        let [a, b, c, d] = [rows[4 * i], rows[4 * i + 1], rows[4 * i + 2], rows[4 * i + 3]];
        for l in 0..BLOCK {
            pixels[2 * i][l] = a[l] + b[l] + c[l];
            pixels[2 * i + 1][l] = b[l] - c[l] - d[l];
        }
    }
}
