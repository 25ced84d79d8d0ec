//! Compiles `proto/onnx.proto` to Rust with prost. The descriptor set comes
//! from protox (pure Rust), so no `protoc` is needed on the build machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let descriptors = protox::compile(["proto/onnx.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
