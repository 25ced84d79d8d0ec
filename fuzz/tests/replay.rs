//! Replays the checked-in seeds (and, with `ONNXC_FUZZ_SMOKE=N`, N
//! pseudo-random inputs per target) through the fuzz targets' checks on the
//! stable toolchain, without libFuzzer: `cd fuzz && cargo test --release`.

use std::path::Path;

type Check = fn(&[u8]);

const TARGETS: [(&str, Check); 3] = [
    ("load_check", onnxc_fuzz::load_check),
    ("compile_run", onnxc_fuzz::compile_run),
    ("kernels", onnxc_fuzz::kernels),
];

#[test]
fn seeds_pass() {
    for (target, check) in TARGETS {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target);
        let mut files: Vec<_> =
            std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        files.sort();
        assert!(!files.is_empty(), "no seeds in {}", dir.display());
        for f in files {
            let data = std::fs::read(&f).expect("read seed");
            check(&data);
        }
    }
}

#[test]
fn random_inputs_pass() {
    let n: usize = std::env::var("ONNXC_FUZZ_SMOKE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for (target, check) in TARGETS {
        for i in 0..n {
            let len = 16 + (i % 200);
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8
                })
                .collect();
            let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
            if let Err(e) = std::panic::catch_unwind(|| check(&data)) {
                let msg =
                    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                panic!("{target} input {i} ({hex}): {}", msg.unwrap_or_default());
            }
        }
    }
}
