//! What each node of the schedule costs in the object: bytes of machine
//! code (measured from the source locations that tag each node's
//! instructions), bytes of read-only data (the constants it reads first,
//! its kernels' parameter blocks) and the kernels it calls. `onnxc info`
//! sums these per op kind; the kernels' own code lives in the kernel
//! library and is not counted here.

use cranelift_codegen::ir::SourceLoc;
use cranelift_codegen::{Final, MachSrcLoc};
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default)]
pub struct Footprint {
    /// Per node, in schedule order.
    pub nodes: Vec<NodeCost>,
    /// Code outside every node: the entry checks, output copies, returns.
    pub other_code: usize,
    /// Constants copied straight to an output.
    pub other_data: usize,
}

#[derive(Clone, Debug, Default)]
pub struct NodeCost {
    pub code: usize,
    pub data: usize,
    pub kernels: BTreeSet<&'static str>,
}

impl Footprint {
    pub(super) fn new(nodes: usize) -> Footprint {
        Footprint { nodes: vec![NodeCost::default(); nodes], ..Footprint::default() }
    }

    pub(super) fn add_data(&mut self, node: Option<usize>, bytes: usize) {
        match node.and_then(|i| self.nodes.get_mut(i)) {
            Some(cost) => cost.data += bytes,
            None => self.other_data += bytes,
        }
    }

    pub(super) fn add_kernel(&mut self, node: usize, name: &'static str) {
        if let Some(cost) = self.nodes.get_mut(node) {
            cost.kernels.insert(name);
        }
    }

    /// Splits one function's `total` code bytes by the node tags (called
    /// once per generated function).
    pub(super) fn measure_code(&mut self, total: usize, ranges: &[MachSrcLoc<Final>]) {
        let mut tagged = 0;
        for r in ranges {
            let bytes = (r.end - r.start) as usize;
            let node = (r.loc != SourceLoc::default()).then(|| r.loc.bits() as usize - 1);
            if let Some(cost) = node.and_then(|i| self.nodes.get_mut(i)) {
                cost.code += bytes;
                tagged += bytes;
            }
        }
        self.other_code += total.saturating_sub(tagged);
    }

    /// True when a node calls a kernel that needs std (see
    /// [`super::needs_std`]): the object then links against
    /// `libonnxc_runtime_std.a`.
    pub fn needs_std(&self) -> bool {
        self.nodes.iter().any(|n| n.kernels.iter().any(|k| super::needs_std(k)))
    }

    pub fn code_bytes(&self) -> usize {
        self.other_code + self.nodes.iter().map(|n| n.code).sum::<usize>()
    }

    pub fn data_bytes(&self) -> usize {
        self.other_data + self.nodes.iter().map(|n| n.data).sum::<usize>()
    }
}
