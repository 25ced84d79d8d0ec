//! The compiled model, called through the generated typed API, against
//! the same perceptron computed in plain Rust from `mlp_spec.rs`.

#[path = "../mlp_spec.rs"]
mod mlp_spec;

use onnxc_example_rust::{classify, mlp};

/// `softmax(relu(x·W1ᵀ + b1)·W2ᵀ + b2)`, in f64.
fn reference(image: &[f32]) -> Vec<f64> {
    let mut x: Vec<f64> = image.iter().map(|&v| f64::from(v)).collect();
    let layers = mlp_spec::layers();
    for (k, layer) in layers.iter().enumerate() {
        x = (0..layer.outputs)
            .map(|o| {
                let row = &layer.weights[o * layer.inputs..(o + 1) * layer.inputs];
                let sum = row.iter().zip(&x).map(|(&w, &v)| f64::from(w) * v).sum::<f64>() + f64::from(layer.bias[o]);
                if k + 1 < layers.len() {
                    sum.max(0.0)
                } else {
                    sum
                }
            })
            .collect();
    }
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exp: Vec<f64> = x.iter().map(|v| (v - max).exp()).collect();
    let total: f64 = exp.iter().sum();
    exp.iter().map(|e| e / total).collect()
}

/// A deterministic image with pixels in [0, 1).
fn image(seed: u32) -> [f32; mlp::inputs::image::LEN] {
    core::array::from_fn(|i| {
        ((i as u32 * 2_654_435_761u32).wrapping_add(seed * 40_503) >> 8) as f32 / (1u32 << 24) as f32
    })
}

#[test]
fn constants_describe_the_compiled_model() {
    assert_eq!(mlp::inputs::image::SHAPE, [1, 784]);
    assert_eq!(mlp::inputs::image::NAME, "image");
    assert_eq!(mlp::outputs::probs::SHAPE, [1, 10]);
    assert_eq!(mlp::outputs::probs::ONNX_TYPE, 1);
    let _: mlp::outputs::probs::Elem = 0.0f32;
    assert_eq!(core::mem::size_of::<mlp::Workspace>(), mlp::WORKSPACE_BYTES.next_multiple_of(64));
    assert_eq!(core::mem::align_of::<mlp::Workspace>(), 64);
}

#[test]
fn outputs_match_plain_rust() {
    let mut workspace = mlp::Workspace::new();
    for seed in 0..8 {
        let x = image(seed);
        let mut probs = [0.0f32; mlp::outputs::probs::LEN];
        mlp::Model.run(&mut workspace, &x, &mut probs).expect("the model runs");
        for (k, (&got, want)) in probs.iter().zip(reference(&x)).enumerate() {
            assert!((f64::from(got) - want).abs() <= 1e-5, "image {seed}, class {k}: {got} vs {want}");
        }
        let (class, p) = classify(&x).expect("the model runs");
        assert_eq!(p, probs[class]);
    }
}

#[test]
fn one_model_serves_many_threads() {
    static MODEL: mlp::Model = mlp::Model;
    let results: Vec<[f32; 10]> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut workspace = Box::new(mlp::Workspace::new());
                    let mut probs = [0.0f32; 10];
                    MODEL.run(&mut workspace, &image(3), &mut probs).expect("the model runs");
                    probs
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert!(results.windows(2).all(|w| w[0] == w[1]), "threads disagree: {results:?}");
}

/// `src/main.rs` includes the module privately in a binary under
/// `#![deny(warnings)]`, as an application would: that it was built shows
/// the generated code compiles without a warning there; it must also
/// classify like the library.
#[test]
fn a_private_module_under_deny_warnings_builds_and_runs() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_onnxc-example-rust")).output().expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let image: [f32; mlp::inputs::image::LEN] = core::array::from_fn(|i| (i % 29) as f32 / 29.0);
    let (class, p) = classify(&image).expect("the model runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("class {class} (p = {p:.4})"));
}
