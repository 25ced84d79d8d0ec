//! Single-thread throughput of the 8-bit integer product and of
//! QLinearConv, per [`ByteKernel`] this CPU supports.
//!
//! Throughput is set in integer operations (`2*M*K*N`, a multiply and an
//! add per step), so Criterion's "elem/s" column reads as OP/s.
//!
//! * `int8/<kernel>/<M>x<K>x<N>`: [`integer_product`] of i8 A (per-row
//!   zero points, like a convolution's weights) by u8 B (a per-tensor zero
//!   point, like its input), corrections included, for 1024^3 and the
//!   conv-shaped 64x576x3136 (ResNet-50 layer1 3x3: M = output channels,
//!   K = input channels x taps, N = output pixels), and the few-pixel
//!   512x4608x49 (ResNet-18 layer4 3x3), where columns are scarce.
//! * `qlinearconv/<kernel>/resnet-3x3`: that layer as QLinearConv does it,
//!   u8 input 1x64x56x56 padded by 1, i8 weights 64x64x3x3 with per-channel
//!   zero points, i32 bias: im2col, product, bias ([`qconv_with`]), then
//!   requantization to u8 ([`onnxc_requantize`]); `<kernel>-no-requantize`
//!   stops before the requantization (ConvInteger's share).
//!
//! Time is the bench thread's CPU time (see `cpu_time`).
//!
//! Run: `cargo bench -p onnxc-runtime --bench int8 -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onnxc_runtime::{
    integer_product, onnxc_requantize, qconv_scratch_bytes, qconv_with, ByteKernel, ConvParams, IntMatrix, QOperand,
    RequantParams, ELEM_F32, ELEM_I8, ELEM_U8,
};
use std::hint::black_box;

mod cpu_time;
use cpu_time::ThreadCpuTime;

type Crit = Criterion<ThreadCpuTime>;

/// (M, K, N).
const SHAPES: &[(usize, usize, usize)] = &[(1024, 1024, 1024), (64, 576, 3136), (512, 4608, 49)];

fn rand_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect()
}

fn kernels() -> impl Iterator<Item = ByteKernel> {
    ByteKernel::ALL.into_iter().filter(|k| {
        let ok = k.available();
        if !ok {
            eprintln!("skipping {}: not supported by this CPU", k.name());
        }
        ok
    })
}

fn bench_product(c: &mut Crit) {
    let mut g = c.benchmark_group("int8");
    g.sample_size(10);
    for kernel in kernels() {
        for &(m, k, n) in SHAPES {
            let (a, b) = (rand_bytes(m * k, 1), rand_bytes(k * n, 2));
            let (a_zp, b_zp) = (rand_bytes(m, 3), [131u8]);
            let am = IntMatrix { data: a.as_ptr(), dtype: ELEM_I8, zp: a_zp.as_ptr(), zp_indexed: true, zp_first: 0 };
            let bm = IntMatrix { data: b.as_ptr(), dtype: ELEM_U8, zp: b_zp.as_ptr(), zp_indexed: false, zp_first: 0 };
            let mut acc = vec![0i32; m * n];
            g.throughput(Throughput::Elements((2 * m * k * n) as u64));
            g.bench_function(BenchmarkId::new(kernel.name(), format!("{m}x{k}x{n}")), |bch| {
                bch.iter(|| unsafe {
                    integer_product(kernel, [m, k, n], am, bm, acc.as_mut_ptr());
                    black_box(&mut acc);
                })
            });
        }
    }
    g.finish();
}

fn bench_qlinearconv(c: &mut Crit) {
    let (channels, side) = (64usize, 56usize);
    let mut p =
        ConvParams { batch: 1, in_channels: 64, out_channels: 64, group: 1, spatial_rank: 2, ..Default::default() };
    for d in 0..2 {
        (p.in_spatial[d], p.out_spatial[d], p.kernel[d]) = (side as i64, side as i64, 3);
        (p.strides[d], p.dilations[d], p.pads_begin[d]) = (1, 1, 1);
    }
    let pixels = side * side;
    let x = rand_bytes(channels * pixels, 4);
    let w = rand_bytes(channels * channels * 9, 5);
    let (x_zp, w_zp) = ([128u8], rand_bytes(channels, 6));
    let bias: Vec<i32> = (0..channels as i32).map(|i| i * 37 - 1000).collect();
    let ops = [QOperand { dtype: ELEM_U8, zp_indexed: 0 }, QOperand { dtype: ELEM_I8, zp_indexed: 1 }];
    let scales = (vec![0.02f32], vec![0.001f32; channels], vec![0.05f32]);
    let y_zp = [120u8];
    let requant = RequantParams {
        scale_dtype: ELEM_F32,
        y_dtype: ELEM_U8,
        outer: 1,
        len: channels as i64,
        inner: pixels as i64,
        a_indexed: 0,
        b_index: 1,
    };
    let mut scratch = vec![0u8; qconv_scratch_bytes(&p, ELEM_U8)];
    let (mut acc, mut y) = (vec![0i32; channels * pixels], vec![0u8; channels * pixels]);
    let mut g = c.benchmark_group("qlinearconv");
    g.sample_size(20);
    g.throughput(Throughput::Elements((2 * channels * channels * 9 * pixels) as u64));
    for (kernel, requantize) in kernels().flat_map(|k| [(k, false), (k, true)]) {
        let name = format!("{}{}", kernel.name(), if requantize { "" } else { "-no-requantize" });
        g.bench_function(BenchmarkId::new(name, "resnet-3x3"), |bch| {
            bch.iter(|| unsafe {
                let status = qconv_with(
                    kernel,
                    &p,
                    &ops,
                    x.as_ptr(),
                    w.as_ptr(),
                    x_zp.as_ptr(),
                    w_zp.as_ptr(),
                    bias.as_ptr(),
                    acc.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                );
                assert_eq!(status, 0);
                if requantize {
                    let (sa, sb, sy) = (scales.0.as_ptr(), scales.1.as_ptr(), scales.2.as_ptr());
                    let y_ptr = y.as_mut_ptr();
                    let st = onnxc_requantize(&requant, acc.as_ptr(), sa as _, sb as _, sy as _, y_zp.as_ptr(), y_ptr);
                    assert_eq!(st, 0);
                }
                black_box((&mut acc, &mut y));
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_product, bench_qlinearconv
}
criterion_main!(benches);
