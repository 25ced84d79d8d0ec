//! Single-thread sgemm throughput next to the machine's measured FMA peak.
//!
//! Every benchmark sets its throughput in floating-point operations, so
//! Criterion's "elem/s" column reads as FLOP/s (e.g. `95 Gelem/s` = 95 GFLOP/s).
//!
//! * `peak/*`: a loop of [`CHAINS`] independent FMA chains per iteration
//!   (enough to hide the FMA latency on two ports), the single-core FMA
//!   ceiling for that vector width.
//! * `sgemm/<kernel>/<M>x<K>x<N>`: `Y = A * B + bias` through
//!   `sgemm_with`, for 1024^3, the conv-shaped 64x576x3136 and a few other
//!   ResNet-50 convolution shapes (M = out channels, K = in channels * taps,
//!   N = output pixels), each with every kernel this CPU supports.
//!
//! * `sgemm-prepacked/<kernel>/<M>x<K>x<N>`: the same products with A
//!   packed ahead of time (`sgemm_prepacked_with`), as convolution weights
//!   are, the bias added per finished tile row.
//! * `conv/<weights>/<layer>`: `onnxc_conv_f32` on ResNet-50, ShuffleNet
//!   and SqueezeNet layers (batch 1), with the weights as given (im2col
//!   into scratch, then sgemm) and packed ahead of time (the direct kernel
//!   where it runs, else im2col generated into the B panels), fastest kernel.
//!
//! Time is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not
//! wall time: the machine is shared, and CPU time leaves out the periods
//! other processes hold the core (it still includes their cache damage).
//!
//! Run: `cargo bench -p onnxc-runtime --bench gemm -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onnxc_runtime::{
    conv_packed_weights_elems, conv_scratch_elems, onnxc_conv_f32, onnxc_pack_conv_weights_f32, pack_a, packed_a_len,
    sgemm_prepacked_with, sgemm_with, ConvParams, Isa, MatMut, MatRef, STATUS_OK,
};
use std::hint::black_box;
use std::ptr::null;

mod cpu_time;
use cpu_time::ThreadCpuTime;

type Crit = Criterion<ThreadCpuTime>;

/// FMA chains per loop iteration: enough to hide the FMA latency on two
/// ports, few enough that the chains and the two operands stay in the 16
/// ymm registers (16 chains spilled there and halved the measured peak).
const CHAINS: usize = 12;
/// Loop iterations per measured call.
const ITERS: usize = 100_000;

#[cfg(target_arch = "x86_64")]
mod peak {
    use super::{CHAINS, ITERS};
    use core::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma512(x: f32) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(x); CHAINS];
        for _ in 0..ITERS {
            for r in acc.iter_mut() {
                *r = _mm512_fmadd_ps(*r, a, b);
            }
        }
        let mut s = _mm512_setzero_ps();
        for r in acc {
            s = _mm512_add_ps(s, r);
        }
        _mm512_reduce_add_ps(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma256(x: f32) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(x); CHAINS];
        for _ in 0..ITERS {
            for r in acc.iter_mut() {
                *r = _mm256_fmadd_ps(*r, a, b);
            }
        }
        let mut out = [0.0f32; 8];
        let mut s = _mm256_setzero_ps();
        for r in acc {
            s = _mm256_add_ps(s, r);
        }
        _mm256_storeu_ps(out.as_mut_ptr(), s);
        out.iter().sum()
    }
}

fn bench_peak(c: &mut Crit) {
    let mut g = c.benchmark_group("peak");
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::Avx512.available() {
            g.throughput(Throughput::Elements((ITERS * CHAINS * 16 * 2) as u64));
            g.bench_function("fma-zmm", |bch| bch.iter(|| unsafe { peak::fma512(black_box(1.0)) }));
        } else {
            eprintln!("skipping peak/fma-zmm: no AVX-512F");
        }
        if Isa::Avx2Fma.available() {
            g.throughput(Throughput::Elements((ITERS * CHAINS * 8 * 2) as u64));
            g.bench_function("fma-ymm", |bch| bch.iter(|| unsafe { peak::fma256(black_box(1.0)) }));
        } else {
            eprintln!("skipping peak/fma-ymm: no AVX2+FMA");
        }
    }
    g.finish();
}

/// (M, K, N).
const SHAPES: &[(usize, usize, usize)] = &[
    (1024, 1024, 1024),
    (64, 576, 3136),  // ResNet-50 layer1 3x3 conv
    (64, 147, 12544), // ResNet-50 stem 7x7/2 conv
    (256, 64, 3136),  // ResNet-50 layer1 1x1 expand
    (128, 1152, 784), // ResNet-50 layer2 3x3 conv
    (256, 2304, 196), // ResNet-50 layer3 3x3 conv
    (512, 4608, 49),  // ResNet-50 layer4 3x3 conv
];

fn rand_vec(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The kernels to bench: those this CPU has, narrowed by `$GEMM_KERNELS`
/// (comma-separated names) when set.
fn kernels() -> Vec<Isa> {
    let only = std::env::var("GEMM_KERNELS").ok();
    Isa::ALL
        .into_iter()
        .filter(|kernel| {
            let wanted = only.as_deref().is_none_or(|o| o.split(',').any(|k| k == kernel.name()));
            if !kernel.available() {
                eprintln!("skipping {}: not supported by this CPU", kernel.name());
            }
            wanted && kernel.available()
        })
        .collect()
}

/// Benches `Y = A * B + bias` for every kernel and shape, A packed per call
/// (`sgemm`) or ahead of time (`sgemm-prepacked`).
fn bench_sgemm(c: &mut Crit) {
    for prepacked in [false, true] {
        let mut g = c.benchmark_group(if prepacked { "sgemm-prepacked" } else { "sgemm" });
        for kernel in kernels() {
            for &(m, k, n) in SHAPES {
                if kernel == Isa::Generic && m * k * n > 200_000_000 {
                    continue; // the scalar reference takes too long per iteration
                }
                let a = rand_vec(m * k, 1);
                let b = rand_vec(k * n, 2);
                let bias = rand_vec(m, 3);
                let mut y = vec![0.0f32; m * n];
                let mut packed = vec![0.0f32; packed_a_len(m, k)];
                let am = MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 };
                let bm = MatRef { ptr: b.as_ptr(), rs: n as isize, cs: 1 };
                unsafe { pack_a(m, k, am, packed.as_mut_ptr()) };
                let finish = |i: usize, _: usize, row: &mut [f32]| row.iter_mut().for_each(|v| *v += bias[i]);
                g.throughput(Throughput::Elements((2 * m * k * n) as u64));
                g.bench_function(BenchmarkId::new(kernel.name(), format!("{m}x{k}x{n}")), |bch| {
                    bch.iter(|| unsafe {
                        let ym = MatMut { ptr: y.as_mut_ptr(), rs: n as isize, cs: 1 };
                        if prepacked {
                            sgemm_prepacked_with(kernel, m, n, k, packed.as_ptr(), &bm, ym, &finish, null());
                        } else {
                            let c = Some(MatRef { ptr: bias.as_ptr(), rs: 1, cs: 0 });
                            sgemm_with(kernel, m, n, k, 1.0, am, bm, 1.0, c, ym);
                        }
                        black_box(&mut y);
                    })
                });
            }
        }
        g.finish();
    }
}

/// Convolutions of ResNet-50, (pointwise, grouped) ShuffleNet, SqueezeNet,
/// DenseNet-121 (32 output channels) and VGG-19 (large planes): (name, in
/// channels, out channels, group, input size, kernel size, stride).
const CONVS: &[(&str, usize, usize, usize, usize, usize, usize)] = &[
    ("stem-7x7s2", 3, 64, 1, 224, 7, 2),
    ("layer1-3x3", 64, 64, 1, 56, 3, 1),
    ("layer1-1x1", 64, 256, 1, 56, 1, 1),
    ("layer2-3x3s2", 128, 128, 1, 56, 3, 2),
    ("layer3-3x3", 256, 256, 1, 14, 3, 1),
    ("layer3-1x1", 256, 1024, 1, 14, 1, 1),
    ("layer3-1x1-reduce", 1024, 256, 1, 14, 1, 1),
    ("layer4-3x3", 512, 512, 1, 7, 3, 1),
    ("layer4-1x1", 2048, 512, 1, 7, 1, 1),
    ("shufflenet-1x1g4-14", 272, 272, 4, 14, 1, 1),
    ("shufflenet-1x1g4-7", 544, 544, 4, 7, 1, 1),
    ("squeezenet-conv10", 512, 1000, 1, 13, 1, 1),
    ("squeezenet-conv1", 3, 64, 1, 224, 3, 2),
    ("squeezenet-e3-55", 16, 64, 1, 55, 3, 1),
    ("squeezenet-e3-13", 64, 256, 1, 13, 3, 1),
    ("densenet-3x3-56", 128, 32, 1, 56, 3, 1),
    ("vgg19-conv1_2", 64, 64, 1, 224, 3, 1),
    ("vgg19-conv1_1", 3, 64, 1, 224, 3, 1),
    ("vgg19-conv2_2", 128, 128, 1, 112, 3, 1),
    ("vgg19-conv3_2", 256, 256, 1, 56, 3, 1),
    ("shufflenet-conv1", 3, 24, 1, 224, 3, 2),
];

fn bench_conv(c: &mut Crit) {
    let mut g = c.benchmark_group("conv");
    for &(name, cin, cout, group, size, kernel, stride) in CONVS {
        let pad = kernel / 2;
        let out = (size + 2 * pad - kernel) / stride + 1;
        let mut p = ConvParams {
            batch: 1,
            in_channels: cin as i64,
            out_channels: cout as i64,
            group: group as i64,
            spatial_rank: 2,
            ..Default::default()
        };
        p.in_spatial[..2].fill(size as i64);
        p.out_spatial[..2].fill(out as i64);
        p.kernel[..2].fill(kernel as i64);
        p.strides[..2].fill(stride as i64);
        p.dilations[..2].fill(1);
        p.pads_begin[..2].fill(pad as i64);
        let x = rand_vec(cin * size * size, 1);
        let w = rand_vec(cout * cin / group * kernel * kernel, 2);
        let bias = rand_vec(cout, 3);
        let mut y = vec![0.0f32; cout * out * out];
        let packed_params = ConvParams { packed_weights: 1, ..p };
        let mut packed = vec![0.0f32; conv_packed_weights_elems(&p)];
        assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
        g.throughput(Throughput::Elements((2 * cout * cin / group * kernel * kernel * out * out) as u64));
        for (layout, params, weights) in [("as-given", p, &w), ("prepacked", packed_params, &packed)] {
            let mut scratch = vec![0.0f32; conv_scratch_elems(&params)];
            g.bench_function(BenchmarkId::new(layout, name), |bch| {
                bch.iter(|| unsafe {
                    let (xp, wp, bp) = (x.as_ptr(), weights.as_ptr(), bias.as_ptr());
                    let status =
                        onnxc_conv_f32(&params, xp, wp, bp, null(), y.as_mut_ptr(), scratch.as_mut_ptr(), null());
                    assert_eq!(status, STATUS_OK);
                    black_box(&mut y);
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_peak, bench_sgemm, bench_conv
}
criterion_main!(benches);
