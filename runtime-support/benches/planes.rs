//! Single-thread throughput of the per-plane kernels: pooling and depthwise
//! convolution, which read each input element a few times and are bound by
//! memory and loop control rather than by FMA throughput.
//!
//! * `pool/<layer>`: `onnxc_pool_f32` (max or average, 2-D) on the pooling
//!   layers of SqueezeNet, ResNet-50 and Inception v2, global average pools
//!   included.
//! * `depthwise/<layer>`: `onnxc_conv_f32` with `group == channels` on
//!   ShuffleNet, MobileNet, MnasNet and EfficientNet shapes;
//!   `blocked-depthwise/<layer>` the same layers in the blocked layout
//!   (`onnxc_conv_blocked_f32`, weights packed once).
//!
//! Throughput is in bytes of input and output (Criterion's "B/s"), each
//! counted once. Time is the thread's CPU time, as in the `gemm` bench.
//!
//! Run: `cargo bench -p onnxc-runtime --bench planes -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onnxc_runtime::{
    conv_blocked_weights_elems, conv_scratch_elems, onnxc_conv_blocked_f32, onnxc_conv_f32,
    onnxc_pack_conv_weights_blocked_f32, onnxc_pool_f32, ConvParams, PoolParams, MAX_RANK, POOL_AVERAGE, POOL_MAX,
    STATUS_OK,
};
use std::hint::black_box;
use std::ptr::null;

mod cpu_time;
use cpu_time::ThreadCpuTime;

type Crit = Criterion<ThreadCpuTime>;

/// (name, kind, channels, input size, kernel size, stride, padding).
const POOLS: &[(&str, i64, usize, usize, usize, usize, usize)] = &[
    ("squeezenet-max1", POOL_MAX, 96, 109, 3, 2, 0),
    ("squeezenet-max2", POOL_MAX, 256, 54, 3, 2, 0),
    ("squeezenet-max3", POOL_MAX, 512, 27, 3, 2, 0),
    ("squeezenet-global-avg", POOL_AVERAGE, 1000, 13, 13, 1, 0),
    ("resnet-max", POOL_MAX, 64, 112, 3, 2, 1),
    ("inception-avg28", POOL_AVERAGE, 256, 28, 3, 1, 1),
    ("inception-avg14", POOL_AVERAGE, 576, 14, 3, 1, 1),
    ("inception-max7", POOL_MAX, 1024, 7, 3, 1, 1),
    ("resnet-global-avg", POOL_AVERAGE, 2048, 7, 7, 1, 0),
];

/// (name, channels, input size, kernel size, stride).
const DEPTHWISE: &[(&str, usize, usize, usize, usize)] = &[
    ("mobilenet-112", 32, 112, 3, 1),
    ("mobilenet-112s2", 64, 112, 3, 2),
    ("shufflenet-28s2", 240, 56, 3, 2),
    ("shufflenet-28", 240, 28, 3, 1),
    ("shufflenet-14", 480, 14, 3, 1),
    ("shufflenet-7", 960, 7, 3, 1),
    ("efficientnet-56", 144, 56, 3, 1),
    ("mnasnet-28k5", 120, 28, 5, 1),
    ("mnasnet-14k5", 480, 14, 5, 1),
    ("mnasnet-7k5", 1152, 7, 5, 1),
];

fn rand_vec(len: usize) -> Vec<f32> {
    let mut s = 7u64;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Sets the two spatial dims of each of `dims` to its value: square layers.
fn square<const N: usize>(dims: [&mut [i64; MAX_RANK]; N], values: [usize; N]) {
    for (dim, value) in dims.into_iter().zip(values) {
        dim[..2].fill(value as i64);
    }
}

fn bench_pool(c: &mut Crit) {
    let mut g = c.benchmark_group("pool");
    for &(name, kind, channels, size, kernel, stride, pad) in POOLS {
        let out = (size + 2 * pad - kernel) / stride + 1;
        let mut p = PoolParams { kind, batch: 1, channels: channels as i64, spatial_rank: 2, ..Default::default() };
        let dims = [&mut p.in_spatial, &mut p.out_spatial, &mut p.kernel, &mut p.strides, &mut p.dilations];
        square(dims, [size, out, kernel, stride, 1]);
        square([&mut p.pads_begin, &mut p.pads_end], [pad, pad]);
        let x = rand_vec(channels * size * size);
        let mut y = vec![0.0f32; channels * out * out];
        g.throughput(Throughput::Bytes(4 * (x.len() + y.len()) as u64));
        g.bench_function(BenchmarkId::from_parameter(name), |bch| {
            bch.iter(|| unsafe {
                let status = onnxc_pool_f32(&p, x.as_ptr(), y.as_mut_ptr(), core::ptr::null_mut(), null());
                assert_eq!(status, STATUS_OK);
                black_box(&mut y);
            })
        });
    }
    g.finish();
}

/// A depthwise layer's params and output side.
fn depthwise_params(channels: usize, size: usize, kernel: usize, stride: usize) -> (ConvParams, usize) {
    let pad = kernel / 2;
    let out = (size + 2 * pad - kernel) / stride + 1;
    let mut p = ConvParams {
        batch: 1,
        in_channels: channels as i64,
        out_channels: channels as i64,
        group: channels as i64,
        spatial_rank: 2,
        ..Default::default()
    };
    let dims = [&mut p.in_spatial, &mut p.out_spatial, &mut p.kernel, &mut p.strides, &mut p.dilations];
    square(dims, [size, out, kernel, stride, 1]);
    square([&mut p.pads_begin], [pad]);
    (p, out)
}

fn bench_depthwise(c: &mut Crit) {
    let mut g = c.benchmark_group("depthwise");
    for &(name, channels, size, kernel, stride) in DEPTHWISE {
        let (p, out) = depthwise_params(channels, size, kernel, stride);
        let x = rand_vec(channels * size * size);
        let w = rand_vec(channels * kernel * kernel);
        let bias = rand_vec(channels);
        let mut y = vec![0.0f32; channels * out * out];
        let mut scratch = vec![0.0f32; conv_scratch_elems(&p)];
        g.throughput(Throughput::Bytes(4 * (x.len() + y.len()) as u64));
        g.bench_function(BenchmarkId::from_parameter(name), |bch| {
            bch.iter(|| unsafe {
                let (xp, wp, bp) = (x.as_ptr(), w.as_ptr(), bias.as_ptr());
                let status = onnxc_conv_f32(&p, xp, wp, bp, null(), y.as_mut_ptr(), scratch.as_mut_ptr(), null());
                assert_eq!(status, STATUS_OK);
                black_box(&mut y);
            })
        });
    }
    g.finish();
}

fn bench_blocked_depthwise(c: &mut Crit) {
    let mut g = c.benchmark_group("blocked-depthwise");
    for &(name, channels, size, kernel, stride) in DEPTHWISE {
        let (p, out) = depthwise_params(channels, size, kernel, stride);
        let x = rand_vec(channels * size * size);
        let mut w = vec![0.0f32; conv_blocked_weights_elems(&p)];
        let status = unsafe { onnxc_pack_conv_weights_blocked_f32(&p, rand_vec(w.len()).as_ptr(), w.as_mut_ptr()) };
        assert_eq!(status, STATUS_OK);
        let bias = rand_vec(channels);
        let mut y = vec![0.0f32; channels * out * out];
        g.throughput(Throughput::Bytes(4 * (x.len() + y.len()) as u64));
        g.bench_function(BenchmarkId::from_parameter(name), |bch| {
            bch.iter(|| unsafe {
                let (xp, wp, bp, yp) = (x.as_ptr(), w.as_ptr(), bias.as_ptr(), y.as_mut_ptr());
                let status = onnxc_conv_blocked_f32(&p, xp, wp, bp, null(), yp, core::ptr::null_mut(), null());
                assert_eq!(status, STATUS_OK);
                black_box(&mut y);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_pool, bench_depthwise, bench_blocked_depthwise
}
criterion_main!(benches);
