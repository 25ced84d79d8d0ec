//! The example's model, shared by `build.rs` (which writes it as ONNX) and
//! the test (which computes it again in plain Rust): a 784-128-10
//! perceptron, `softmax(relu(x·W1ᵀ + b1)·W2ᵀ + b2)`, with deterministic
//! pseudo-random weights, so the repository needs no model file.

/// Input features (a 28×28 image), hidden units, classes.
pub const SIZES: [usize; 3] = [784, 128, 10];

/// One fully connected layer: `weights` is `[outputs][inputs]`, row-major
/// (ONNX Gemm with `transB = 1`, as PyTorch exports it).
pub struct Layer {
    pub inputs: usize,
    pub outputs: usize,
    pub weights: Vec<f32>,
    pub bias: Vec<f32>,
}

/// The two layers, weights uniform in ±1/√inputs.
pub fn layers() -> [Layer; 2] {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    [0, 1].map(|k| {
        let (inputs, outputs) = (SIZES[k], SIZES[k + 1]);
        let scale = 1.0 / (inputs as f32).sqrt();
        let weights = (0..inputs * outputs).map(|_| random.next() * scale).collect();
        let bias = (0..outputs).map(|_| random.next() * scale).collect();
        Layer { inputs, outputs, weights, bias }
    })
}

/// xorshift64*, mapped to [-1, 1).
struct Random(u64);

impl Random {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        bits as f32 / (1u64 << 23) as f32 - 1.0
    }
}
