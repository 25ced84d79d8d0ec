//! Winograd's F(4×4, 3×3) and F(2×2, 3×3) for the blocked 3×3 stride-1
//! convolution: layers that keep their map's size, with at least 16 input
//! and output channels, on maps of enough tiles ([`conv_takes_winograd`]).
//!
//! The direct kernels already run ResNet's and VGG's 3×3 layers near the
//! FMA peak, so the arithmetic itself has to shrink. An `m×m` output tile
//! reads an `(m+2)×(m+2)` input patch, and in the transformed domain
//! (`V = Bᵀ d B`, `U = G g Gᵀ`, `Y = Aᵀ (U ⊙ V) A`) its `9m²` multiply-adds
//! per input channel become `(m+2)²`: 36 per 16 outputs for F(4×4, 3×3),
//! 16 per 4 for F(2×2, 3×3) (against 9 per output direct). Summed over
//! the input channels each transformed position `ξ` is a matrix product —
//! the tiles' `V[ξ]` (channels × tiles) by the filters' `U[ξ]` — which is
//! exactly a pointwise convolution of a one-row "image" of tiles, in the
//! blocked layout. So a chunk of tiles runs in three passes through
//! scratch:
//!
//! 1. the input transform writes `V[ξ]` (`[C/8][tiles][8]`) for the chunk,
//!    the padding read as zeros, vectorised across a block's 8 channels;
//! 2. for each `ξ` the caller's pointwise convolution (the fast blocked
//!    one, or the portable reference) makes `M[ξ] = U[ξ] · V[ξ]`;
//! 3. the output transform sums `M` back into `m×m` pixels and applies
//!    the epilogue (bias, residual, activation) as it stores them.
//!
//! A layer takes the larger tile when its map has 32 of them (28×28 and
//! up), else the smaller one (down to 7×7 maps, [`SIDES`]): the larger
//! tile's weights are 36/9 of the direct ones (the smaller's 16/9), which
//! a small map does not earn back. `U` is computed at compile time by
//! [`pack_weights`], in the pointwise layout of each `ξ`.
//!
//! Every chunk reads all of `U`. Chunks are sized so that their `V` and
//! `M` sit in a core's L2 while `U` stays in cache from one chunk to the
//! next; a layer whose `U` would not (VGG's 512 channels: 36 MB) takes
//! chunks of a few MB instead, whose `V` and `M` live in L3, so that `U`
//! streams from memory once or twice per image rather than once per
//! handful of tiles. When the images' chunks are fewer than the tasks,
//! the tasks split a chunk's output channels. Each task has its own part
//! of the scratch and every output is computed by one chunk in one order,
//! so the result does not depend on the thread count. The sums' order
//! differs from the direct convolution's, so results are within rounding
//! of it: F(2×2, 3×3)'s transforms are exact in binary (sums and
//! halvings), F(4×4, 3×3)'s `G` has sixths and its `Aᵀ` weights up to 8,
//! which costs a few bits (on random 256-channel sums, median errors of
//! 3e-6 of the largest output against 5e-7).

use super::blocked::{BlockedOperands, BlockedShape, BLOCK};
use super::conv::{epilogue, tile_activation};
use super::prepacked::TileActivation;
use crate::abi::conv::ConvParams;
use crate::parallel::{share, Parallel};

/// A block's 8 channels of one position.
type Lanes = [f32; BLOCK];

/// Output tile sides, the preferred first, each with the fewest tiles per
/// image for which its transforms pay: 28×28 maps and up take 4×4 tiles,
/// 7×7 to 27×27 maps 2×2 ones.
const SIDES: [(usize, usize); 2] = [(4, 32), (2, 16)];
/// Transformed positions of the largest patch (6×6).
const MAX_XI: usize = 36;
/// Bytes of a chunk's `V` and `M` together: about half a core's L2...
const CHUNK_BYTES: usize = 512 * 1024;
/// ...unless the transformed weights are more than [`RESIDENT_WEIGHT_BYTES`]:
/// each chunk reads all of them, so then chunks are larger and their `V`
/// and `M` live in L3 instead.
const SPILL_CHUNK_BYTES: usize = 8 * 1024 * 1024;
/// Transformed weights that stay in cache from one chunk to the next.
const RESIDENT_WEIGHT_BYTES: usize = 4 * 1024 * 1024;
/// Fewest output channel blocks a task's products may cover: when the
/// images are too few chunks to give every task one, tasks split the
/// output channels; with threads each repeats the chunk's input transform
/// (about `3 / out_channels` of its products' work).
const MIN_GROUP_BLOCKS: usize = 8;
/// Most tasks a convolution is split into (each has a chunk of scratch).
const MAX_TASKS: usize = 4;

/// Whether the blocked convolution `p` runs as Winograd: a blocked 3×3
/// layer of stride 1 and dilation 1 that keeps the map's size (padded by
/// one) or is unpadded (its padding a node of its own, as a reflection
/// Pad before it), with at least 16 input and output channels, on a map
/// of enough tiles of one of the [`SIDES`].
pub fn conv_takes_winograd(p: &ConvParams) -> bool {
    let Some(s) = BlockedShape::of(p) else { return false };
    let same = s.pads == [1, 1] && [s.out_h, s.out_w] == [s.in_h, s.in_w];
    let valid = s.pads == [0, 0] && s.in_h > 2 && s.in_w > 2 && [s.out_h, s.out_w] == [s.in_h - 2, s.in_w - 2];
    s.kernel == [3, 3]
        && s.strides == [1, 1]
        && s.dilations == [1, 1]
        && (same || valid)
        && !s.nchw_input
        && !s.depthwise
        && s.in_channels >= 2 * BLOCK
        && s.out_blocks >= 2
        && Tiles::of(&s).pay()
}

/// Floats of [`pack_weights`]' output.
pub(crate) fn weights_elems(s: &BlockedShape) -> usize {
    Tiles::of(s).positions() * s.in_channels * s.out_blocks * BLOCK
}

/// Floats of scratch [`conv`] needs for a layer of shape `s` it takes.
pub(crate) fn scratch_elems(s: &BlockedShape) -> usize {
    let plan = Plan::of(s);
    plan.tasks * plan.task_floats
}

/// The `side×side` output tiles of a map, row-major: `cols` to a row,
/// `count` in all.
#[derive(Clone, Copy, Debug)]
struct Tiles {
    side: usize,
    cols: usize,
    count: usize,
}

impl Tiles {
    /// The tiles of the first of [`SIDES`] that [`Tiles::pay`], else of
    /// the last.
    fn of(s: &BlockedShape) -> Tiles {
        let with_side = |(side, _)| {
            let cols = s.out_w.div_ceil(side);
            Tiles { side, cols, count: s.out_h.div_ceil(side) * cols }
        };
        SIDES.map(with_side).into_iter().find(Tiles::pay).unwrap_or(with_side(SIDES[SIDES.len() - 1]))
    }

    /// Whether the map has enough of these tiles for their transforms to pay.
    fn pay(&self) -> bool {
        SIDES.iter().any(|&(side, fewest)| side == self.side && self.count >= fewest)
    }

    /// Transformed positions `ξ` of a tile's patch.
    fn positions(&self) -> usize {
        (self.side + 2) * (self.side + 2)
    }
}

/// How [`conv`] cuts its work: chunks of at most `chunk` tiles (the
/// images' tiles in equal chunks), each in `groups` groups of at most
/// `group_blocks` output channel blocks, run by `tasks` tasks with
/// `task_floats` floats of scratch each.
#[derive(Clone, Copy, Debug)]
struct Plan {
    tiles: Tiles,
    chunks_per_image: usize,
    chunk: usize,
    groups: usize,
    group_blocks: usize,
    tasks: usize,
    task_floats: usize,
}

impl Plan {
    fn of(s: &BlockedShape) -> Plan {
        let tiles = Tiles::of(s);
        let floats_per_tile = tiles.positions() * (s.in_channels + s.out_blocks * BLOCK);
        let budget = if 4 * weights_elems(s) > RESIDENT_WEIGHT_BYTES { SPILL_CHUNK_BYTES } else { CHUNK_BYTES };
        let most = (budget / (4 * floats_per_tile)).max(BLOCK);
        // More chunks than tasks: a multiple of them, so that two or four
        // threads get equal shares.
        let chunks_per_image = match tiles.count.div_ceil(most) {
            few if few <= MAX_TASKS => few,
            many => many.next_multiple_of(MAX_TASKS),
        };
        let chunk = tiles.count.div_ceil(chunks_per_image);
        let chunks = s.batch * chunks_per_image;
        let wanted_groups = MAX_TASKS.div_ceil(chunks).min(s.out_blocks / MIN_GROUP_BLOCKS).max(1);
        let group_blocks = s.out_blocks.div_ceil(wanted_groups);
        let groups = s.out_blocks.div_ceil(group_blocks);
        let tasks = (chunks * groups).min(MAX_TASKS);
        let task_floats = tiles.positions() * (s.in_channels + group_blocks * BLOCK) * chunk;
        Plan { tiles, chunks_per_image, chunk, groups, group_blocks, tasks, task_floats }
    }

    /// Output channel blocks of group `group`.
    fn group(&self, s: &BlockedShape, group: usize) -> core::ops::Range<usize> {
        let start = group * self.group_blocks;
        start..(start + self.group_blocks).min(s.out_blocks)
    }

    /// Tiles `range` of an image's chunk `index`.
    fn chunk_tiles(&self, index: usize) -> core::ops::Range<usize> {
        let start = index * self.chunk;
        start..(start + self.chunk).min(self.tiles.count)
    }
}

/// `G` of F(2×2, 3×3), one row per patch position.
const G2: [[f64; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];
/// `G` of F(4×4, 3×3) (interpolation points 0, ±1, ±2 and ∞).
const G4: [[f64; 3]; 6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

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
    let g_rows: &[[f64; 3]] = if Tiles::of(s).side == 4 { &G4 } else { &G2 };
    let n = g_rows.len();
    let (c, m) = (s.in_channels, s.out_blocks * BLOCK);
    for oc in 0..m {
        for ic in 0..c {
            let g = |ky: usize, kx: usize| *w.add(((oc * c + ic) * 3 + ky) * 3 + kx) as f64;
            for (r, g_row_r) in g_rows.iter().enumerate() {
                // Row r of G g, then of (G g) Gᵀ.
                let gg_row: [f64; 3] = core::array::from_fn(|kx| (0..3).map(|ky| g_row_r[ky] * g(ky, kx)).sum());
                for (q, g_row) in g_rows.iter().enumerate() {
                    let u: f64 = gg_row.iter().zip(g_row).map(|(a, b)| a * b).sum();
                    let at = (((r * n + q) * (m / BLOCK) + oc / BLOCK) * c + ic) * BLOCK + oc % BLOCK;
                    *packed.add(at) = u as f32;
                }
            }
        }
    }
}

/// Tasks [`conv`] splits `s` into (each with its part of the scratch): one
/// without threads, so that a chunk's input transform is not repeated for
/// each of its groups.
///
/// # Safety
/// `parallel` is null or points to a valid [`Parallel`].
pub(crate) unsafe fn tasks(s: &BlockedShape, parallel: *const Parallel) -> usize {
    if Parallel::is_threaded(parallel) {
        Plan::of(s).tasks
    } else {
        1
    }
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
    let tasks = tasks(s, parallel);
    Parallel::for_each(parallel, tasks, |task| run_task(p, s, &o, scratch, (task, tasks), &pointwise));
}

/// Task `task.0` of `task.1` ([`tasks`]) of the convolution `p` (shape
/// `s`, weights packed by [`pack_weights`]): its chunks of tiles (or
/// groups of a chunk's output channels), `pointwise(params, shape,
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
    (task, tasks): (usize, usize),
    pointwise: &P,
) {
    let plan = Plan::of(s);
    let scratch = scratch.add(task * plan.task_floats);
    let mut transformed = None;
    for unit in share(s.batch * plan.chunks_per_image * plan.groups, tasks, task) {
        let (chunk, group) = (unit / plan.groups, unit % plan.groups);
        let (n, index) = (chunk / plan.chunks_per_image, chunk % plan.chunks_per_image);
        let fresh = transformed.replace(chunk) != Some(chunk);
        let part = Part { n, tiles: plan.chunk_tiles(index), blocks: plan.group(s, group), fresh };
        match plan.tiles.side {
            4 => run_chunk::<4, P>(p, s, o, &plan, part, scratch, pointwise),
            _ => run_chunk::<2, P>(p, s, o, &plan, part, scratch, pointwise),
        }
    }
}

/// What one unit of work computes: output channel blocks `blocks` of
/// tiles `tiles` of image `n`, its input transformed into the scratch
/// unless not `fresh` (the task's previous unit left it there).
struct Part {
    n: usize,
    tiles: core::ops::Range<usize>,
    blocks: core::ops::Range<usize>,
    fresh: bool,
}

/// One part of `T×T` tiles: the three passes of the module doc.
#[inline(always)]
unsafe fn run_chunk<const T: usize, P: Fn(&ConvParams, &BlockedShape, BlockedOperands)>(
    p: &ConvParams,
    s: &BlockedShape,
    o: &BlockedOperands,
    plan: &Plan,
    part: Part,
    scratch: *mut f32,
    pointwise: &P,
) {
    let Part { n, tiles, blocks, fresh } = part;
    let positions = (T + 2) * (T + 2);
    let count = tiles.len();
    // Per ξ: floats of U, of the chunk's V and of the part's M.
    let u_len = s.out_blocks * BLOCK * s.in_channels;
    let (v_len, m_len) = (s.in_channels * count, blocks.len() * BLOCK * count);
    let (v, m) = (scratch, scratch.add(positions * v_len));
    if fresh {
        let x = o.x.add(n * s.in_image());
        for ib in 0..s.in_blocks {
            let plane = x.add(ib * s.in_h * s.in_w * BLOCK);
            for (t, tile) in tiles.clone().enumerate() {
                let (ty, tx) = (tile / plan.tiles.cols, tile % plan.tiles.cols);
                let mut patch = [[0.0f32; BLOCK]; MAX_XI];
                input_patch::<T>(s, plane, ty, tx, &mut patch);
                let out = v.add((ib * count + t) * BLOCK);
                input_transform::<T>(&patch, out, v_len);
            }
        }
    }
    // One ξ: a pointwise convolution of a 1 × `count` image.
    let mut one = ConvParams { batch: 1, group: 1, spatial_rank: 2, out_channels: (blocks.len() * BLOCK) as i64, ..*p };
    one.in_spatial[..2].copy_from_slice(&[1, count as i64]);
    one.out_spatial[..2].copy_from_slice(&[1, count as i64]);
    one.kernel[..2].copy_from_slice(&[1, 1]);
    one.pads_begin[..2].copy_from_slice(&[0, 0]);
    (one.activation, one.residual) = (0, 0);
    // `s` with the map replaced (its strides and dilations are already 1).
    let one_shape = BlockedShape {
        batch: 1,
        in_h: 1,
        in_w: count,
        out_h: 1,
        out_w: count,
        kernel: [1, 1],
        pads: [0, 0],
        out_blocks: blocks.len(),
        ..*s
    };
    for xi in 0..positions {
        let operands = BlockedOperands {
            x: v.add(xi * v_len),
            w: o.w.add(xi * u_len + blocks.start * s.in_channels * BLOCK),
            bias: core::ptr::null(),
            residual: core::ptr::null(),
            y: m.add(xi * m_len),
        };
        pointwise(&one, &one_shape, operands);
    }
    // An activation that is not a select goes over the tile's rows after
    // their bias and residual.
    let select = tile_activation(p);
    let lanewise = Lanewise::of(select.unwrap_or(TileActivation::None));
    for (mb, ob) in blocks.enumerate() {
        for (t, tile) in tiles.clone().enumerate() {
            let mut pixels = [[0.0f32; BLOCK]; 16];
            output_transform::<T>(m.add((mb * count + t) * BLOCK), m_len, &mut pixels);
            let (ty, tx) = (tile / plan.tiles.cols, tile % plan.tiles.cols);
            for (k, pixel) in pixels[..T * T].iter().enumerate() {
                let (oy, ox) = (T * ty + k / T, T * tx + k % T);
                if oy < s.out_h && ox < s.out_w {
                    let at = n * s.out_image() + ((ob * s.out_h + oy) * s.out_w + ox) * BLOCK;
                    finish_lanes(o, at, ob, lanewise, pixel, &mut *(o.y.add(at) as *mut Lanes));
                }
            }
            if select.is_none() {
                activate_tile_rows::<T>(p, s, o.y.add(n * s.out_image() + ob * s.out_h * s.out_w * BLOCK), ty, tx);
            }
        }
    }
}

/// The epilogue's activation on the stored rows of tile `(ty, tx)` of one
/// output block `y` (`[out_h][out_w][8]`): each row's pixels are
/// consecutive, so the host's vectors take up to `8T` floats at once
/// rather than one pixel's 8 (per pixel, YOLO's SiLU 3×3 layers ran 10
/// to 20 times slower).
#[inline(always)]
unsafe fn activate_tile_rows<const T: usize>(p: &ConvParams, s: &BlockedShape, y: *mut f32, ty: usize, tx: usize) {
    let cols = T.min(s.out_w - T * tx);
    for oy in T * ty..(T * ty + T).min(s.out_h) {
        let row = core::slice::from_raw_parts_mut(y.add((oy * s.out_w + T * tx) * BLOCK), cols * BLOCK);
        epilogue(p, None, None, row);
    }
}

/// A [`TileActivation`] in one branch-free form, `v < 0 ? v * slope : v`
/// then clamped to `[lo, hi]` by compares and selects, so that the output
/// pass vectorises whichever it is (a slope of 1 and infinite bounds leave
/// `v`'s bits as they are, NaN included).
#[derive(Clone, Copy)]
struct Lanewise {
    slope: f32,
    lo: f32,
    hi: f32,
}

impl Lanewise {
    fn of(activation: TileActivation) -> Lanewise {
        let (slope, lo, hi) = match activation {
            TileActivation::None => (1.0, f32::NEG_INFINITY, f32::INFINITY),
            TileActivation::Clamp { lo, hi } => (1.0, lo, hi),
            TileActivation::Leaky { slope } => (slope, f32::NEG_INFINITY, f32::INFINITY),
        };
        Lanewise { slope, lo, hi }
    }

    #[inline(always)]
    fn apply(self, v: f32) -> f32 {
        let leaky = if v < 0.0 { v * self.slope } else { v };
        let high = if leaky > self.hi { self.hi } else { leaky };
        if leaky < self.lo {
            self.lo
        } else {
            high
        }
    }
}

/// `out = act((sums + bias) + residual)` on a vector's lanes, written so
/// that it vectorises: [`super::blocked::finish_vector`]'s arithmetic for the activations
/// that are a compare and a select.
#[inline(always)]
unsafe fn finish_lanes(o: &BlockedOperands, at: usize, ob: usize, activation: Lanewise, sums: &Lanes, out: &mut Lanes) {
    let mut v = *sums;
    if !o.bias.is_null() {
        let bias = &*(o.bias.add(ob * BLOCK) as *const Lanes);
        v.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
    if !o.residual.is_null() {
        let residual = &*(o.residual.add(at) as *const Lanes);
        v.iter_mut().zip(residual).for_each(|(v, r)| *v += r);
    }
    for (o, v) in out.iter_mut().zip(v) {
        *o = activation.apply(v);
    }
}

/// The `(T+2)×(T+2)` input patch of tile `(ty, tx)` in one channel block
/// `x` (`[in_h][in_w][8]`) into `patch` (`(T+2)r + q`), rows and columns
/// from `T·ty - pad` and `T·tx - pad` (pad 1 or 0); taps outside the map
/// stay zero.
#[inline(always)]
unsafe fn input_patch<const T: usize>(
    s: &BlockedShape,
    x: *const f32,
    ty: usize,
    tx: usize,
    patch: &mut [Lanes; MAX_XI],
) {
    let n = T + 2;
    let [pad_top, pad_left] = s.pads;
    let (top, left) = ((T * ty).wrapping_sub(pad_top), (T * tx).wrapping_sub(pad_left));
    let load = |iy: usize, ix: usize| *(x.add((iy * s.in_w + ix) * BLOCK) as *const Lanes);
    if T * ty >= pad_top && T * tx >= pad_left && top + n <= s.in_h && left + n <= s.in_w {
        // Inside the map: no tap to test.
        for r in 0..n {
            for q in 0..n {
                patch[n * r + q] = load(top + r, left + q);
            }
        }
        return;
    }
    for r in 0..n {
        let iy = top.wrapping_add(r);
        if iy >= s.in_h {
            continue;
        }
        for q in 0..n {
            let ix = left.wrapping_add(q);
            if ix < s.in_w {
                patch[n * r + q] = load(iy, ix);
            }
        }
    }
}

/// Lane-wise `f`: written so that it vectorises.
#[inline(always)]
fn lanes(f: impl Fn(usize) -> f32) -> Lanes {
    core::array::from_fn(f)
}

/// `Bᵀ d` of one line of a patch (its first `T + 2` vectors):
/// F(2×2, 3×3)'s `Bᵀ = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]`, or
/// F(4×4, 3×3)'s, with rows `[4,0,-5,0,1,0]`, `[0,-4,-4,1,1,0]`,
/// `[0,4,-4,-1,1,0]`, `[0,-2,-1,2,1,0]`, `[0,2,-1,-2,1,0]`, `[0,4,0,-5,0,1]`.
#[inline(always)]
fn input_line<const T: usize>(d: &[Lanes; 6]) -> [Lanes; 6] {
    let zero = [0.0; BLOCK];
    if T == 2 {
        return [
            lanes(|l| d[0][l] - d[2][l]),
            lanes(|l| d[1][l] + d[2][l]),
            lanes(|l| d[2][l] - d[1][l]),
            lanes(|l| d[1][l] - d[3][l]),
            zero,
            zero,
        ];
    }
    let (fours, ones) = (lanes(|l| d[4][l] - 4.0 * d[2][l]), lanes(|l| d[3][l] - 4.0 * d[1][l]));
    let (evens, odds) = (lanes(|l| d[4][l] - d[2][l]), lanes(|l| 2.0 * (d[3][l] - d[1][l])));
    [
        lanes(|l| 4.0 * d[0][l] - 5.0 * d[2][l] + d[4][l]),
        lanes(|l| fours[l] + ones[l]),
        lanes(|l| fours[l] - ones[l]),
        lanes(|l| evens[l] + odds[l]),
        lanes(|l| evens[l] - odds[l]),
        lanes(|l| 4.0 * d[1][l] - 5.0 * d[3][l] + d[5][l]),
    ]
}

/// `Aᵀ m` of one line of products (its first `T + 2` vectors) into `T`
/// vectors: F(2×2, 3×3)'s `Aᵀ = [[1,1,1,0],[0,1,-1,-1]]`, or F(4×4, 3×3)'s,
/// with rows `[1,1,1,1,1,0]`, `[0,1,-1,2,-2,0]`, `[0,1,1,4,4,0]`, `[0,1,-1,8,-8,1]`.
#[inline(always)]
fn output_line<const T: usize>(m: &[Lanes; 6]) -> [Lanes; 4] {
    let zero = [0.0; BLOCK];
    if T == 2 {
        return [lanes(|l| m[0][l] + m[1][l] + m[2][l]), lanes(|l| m[1][l] - m[2][l] - m[3][l]), zero, zero];
    }
    let (sum12, diff12) = (lanes(|l| m[1][l] + m[2][l]), lanes(|l| m[1][l] - m[2][l]));
    let (sum34, diff34) = (lanes(|l| m[3][l] + m[4][l]), lanes(|l| m[3][l] - m[4][l]));
    [
        lanes(|l| m[0][l] + sum12[l] + sum34[l]),
        lanes(|l| diff12[l] + 2.0 * diff34[l]),
        lanes(|l| sum12[l] + 4.0 * sum34[l]),
        lanes(|l| diff12[l] + 8.0 * diff34[l] + m[5][l]),
    ]
}

/// `V = Bᵀ d B` of a patch (`(T+2)r + q`), vector `ξ` stored at `out + ξ * stride`.
#[inline(always)]
unsafe fn input_transform<const T: usize>(patch: &[Lanes; MAX_XI], out: *mut f32, stride: usize) {
    let n = T + 2;
    let zero = [0.0; BLOCK];
    let mut d = *patch;
    for q in 0..n {
        let column = core::array::from_fn(|r| if r < n { d[r * n + q] } else { zero });
        let column = input_line::<T>(&column);
        for r in 0..n {
            d[r * n + q] = column[r];
        }
    }
    for r in 0..n {
        let row = core::array::from_fn(|q| if q < n { d[r * n + q] } else { zero });
        let row = input_line::<T>(&row);
        d[r * n..(r + 1) * n].copy_from_slice(&row[..n]);
    }
    for (xi, vector) in d[..n * n].iter().enumerate() {
        *(out.add(xi * stride) as *mut Lanes) = *vector;
    }
}

/// `Y = Aᵀ M A` from the `(T+2)²` products at `m + ξ * stride` into the
/// `T×T` `pixels` (`T i + j`).
#[inline(always)]
unsafe fn output_transform<const T: usize>(m: *const f32, stride: usize, pixels: &mut [Lanes; 16]) {
    let n = T + 2;
    let zero = [0.0; BLOCK];
    let at = |xi: usize| *(m.add(xi * stride) as *const Lanes);
    // Aᵀ M: T rows of n.
    let mut rows = [zero; 4 * 6];
    for q in 0..n {
        let column = core::array::from_fn(|r| if r < n { at(r * n + q) } else { zero });
        for (i, sum) in output_line::<T>(&column)[..T].iter().enumerate() {
            rows[i * n + q] = *sum;
        }
    }
    for i in 0..T {
        let row = core::array::from_fn(|q| if q < n { rows[i * n + q] } else { zero });
        pixels[i * T..(i + 1) * T].copy_from_slice(&output_line::<T>(&row)[..T]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocked shape of a batch-1 3×3 layer, `channels` in and out, on
    /// a `side×side` map.
    fn layer(channels: usize, side: usize) -> BlockedShape {
        let blocks = channels / BLOCK;
        BlockedShape {
            batch: 1,
            in_channels: channels,
            in_blocks: blocks,
            out_blocks: blocks,
            nchw_input: false,
            depthwise: false,
            in_h: side,
            in_w: side,
            out_h: side,
            out_w: side,
            kernel: [3, 3],
            strides: [1, 1],
            dilations: [1, 1],
            pads: [1, 1],
        }
    }

    #[test]
    fn large_maps_take_the_large_tile_and_small_ones_the_small() {
        assert_eq!(Tiles::of(&layer(64, 56)).side, 4);
        assert_eq!(Tiles::of(&layer(512, 28)).side, 4);
        assert_eq!(Tiles::of(&layer(256, 14)).side, 2);
        assert!(Tiles::of(&layer(512, 7)).pay() && Tiles::of(&layer(512, 7)).side == 2);
        assert!(!Tiles::of(&layer(512, 6)).pay());
        assert_eq!(weights_elems(&layer(64, 56)), 36 * 64 * 64);
        assert_eq!(weights_elems(&layer(256, 14)), 16 * 256 * 256);
    }

    #[test]
    fn chunks_fit_l2_unless_the_weights_do_not_stay_in_cache() {
        // 64 channels: 590 KB of weights, chunks of V and M within 512 KiB.
        let small = Plan::of(&layer(64, 112));
        assert!(small.task_floats * 4 <= CHUNK_BYTES && small.chunks_per_image > 1);
        assert_eq!((small.groups, small.tasks), (1, MAX_TASKS));
        // 512 channels: 36 MB of weights, read once for the image's one
        // chunk, whose output channels four tasks share.
        let large = Plan::of(&layer(512, 28));
        assert_eq!((large.chunks_per_image, large.chunk), (1, 49));
        assert_eq!((large.groups, large.group_blocks, large.tasks), (4, 16, 4));
        assert!(large.task_floats * 4 <= SPILL_CHUNK_BYTES);
    }
}
