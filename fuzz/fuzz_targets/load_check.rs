//! cargo-fuzz target; what it checks is [`onnxc_fuzz::load_check`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| onnxc_fuzz::load_check(data));
