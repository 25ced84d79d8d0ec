//! The generated module as an application includes it: privately, in a
//! binary crate that denies every warning. Items an application does not
//! use (here most of the descriptive constants) must not be reported, or
//! `#![deny(warnings)]` crates would not build. Prints the class of a
//! fixed image and its probability.
#![deny(warnings)]

// Cargo passes a build script's `rustc-link-lib` to a package's library
// target only: the model's archive reaches this binary through the library
// (a crate with no library target links it directly).
use onnxc_example_rust as _;

mod mlp {
    include!(concat!(env!("OUT_DIR"), "/mlp.rs"));
}

fn main() {
    let image: [f32; mlp::inputs::image::LEN] = core::array::from_fn(|i| (i % 29) as f32 / 29.0);
    let mut workspace = mlp::Workspace::default();
    let mut probs = [0.0; mlp::outputs::probs::LEN];
    if let Err(e) = mlp::Model.run(&mut workspace, &image, &mut probs) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let best = (0..probs.len()).fold(0, |best, k| if probs[k] > probs[best] { k } else { best });
    println!("class {best} (p = {:.4})", probs[best]);
}
