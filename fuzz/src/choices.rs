//! The fuzzer's bytes read as a stream of decisions: every structure-aware
//! target draws its sizes, operators and attributes from here, so that
//! libFuzzer's mutations of the bytes become mutations of the structure.
//! Past the end every draw is 0: short inputs give small, valid cases.

pub struct Choices<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Choices<'a> {
    pub fn new(data: &'a [u8]) -> Choices<'a> {
        Choices { data, at: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let v = u16::from_le_bytes([self.byte(), self.byte()]) as usize;
        v % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    pub fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[self.below(items.len())]
    }

    /// A small float, mostly in [-2, 2], sometimes 0 or an edge value.
    pub fn value(&mut self) -> f32 {
        match self.byte() {
            0..=3 => 0.0,
            4 => 1e30,
            5 => -1e-30,
            b => (b as f32 - 130.0) / 64.0,
        }
    }

    /// 64 bits for seeding a generator.
    pub fn seed(&mut self) -> u64 {
        (0..8).fold(0u64, |acc, _| acc << 8 | self.byte() as u64)
    }
}

/// xorshift64*: deterministic filler for tensors too large to draw byte by byte.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// A float in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (v >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}
