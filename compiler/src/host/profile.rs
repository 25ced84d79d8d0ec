//! Where a run's time goes, node by node (`onnxc bench --profile`).
//!
//! Profiled code ([`crate::codegen::Mode::profile`]) calls
//! [`onnxc_profile_node`] on entry and after every node; the time since the
//! previous call is charged to the node just done. The clock is read in
//! this process, so only JIT-compiled code is profiled; the overhead is one
//! call and one clock read per node. Times are kept per thread: the
//! generated code runs on the caller's thread (kernel pool workers never
//! call the hook).

use std::cell::RefCell;
use std::time::Instant;

thread_local! {
    static CLOCK: RefCell<Clock> = const { RefCell::new(Clock { last: None, nanos: Vec::new() }) };
}

/// The time charged so far on this thread.
struct Clock {
    /// When the previous hook call returned.
    last: Option<Instant>,
    /// Nanoseconds per node index.
    nanos: Vec<u64>,
}

/// The hook profiled code calls ([`crate::codegen::PROFILE_HOOK`]):
/// `u32::MAX` on entry, else the index of the node just done.
pub extern "C" fn onnxc_profile_node(index: u32) {
    let now = Instant::now();
    CLOCK.with_borrow_mut(|clock| {
        if let (Some(last), Ok(node)) = (clock.last, usize::try_from(index)) {
            if index != u32::MAX {
                if clock.nanos.len() <= node {
                    clock.nanos.resize(node + 1, 0);
                }
                clock.nanos[node] += now.saturating_duration_since(last).as_nanos() as u64;
            }
        }
        // The bookkeeping above is nobody's time.
        clock.last = Some(Instant::now());
    });
}

/// The nanoseconds charged to each of `nodes` nodes on this thread since
/// the previous take; starts the count afresh.
pub fn take(nodes: usize) -> Vec<u64> {
    CLOCK.with_borrow_mut(|clock| {
        let mut nanos = std::mem::take(&mut clock.nanos);
        nanos.resize(nodes, 0);
        clock.last = None;
        nanos
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_the_time_between_calls_to_the_node_just_done() {
        take(0);
        onnxc_profile_node(u32::MAX);
        std::thread::sleep(std::time::Duration::from_millis(2));
        onnxc_profile_node(1);
        onnxc_profile_node(0);
        let nanos = take(3);
        assert_eq!(nanos.len(), 3);
        assert!(nanos[1] >= 2_000_000, "{nanos:?}");
        assert!(nanos[0] < nanos[1] && nanos[2] == 0, "{nanos:?}");
        assert_eq!(take(3), vec![0; 3], "a take starts afresh");
    }

    #[test]
    fn profiled_code_charges_every_node_and_computes_the_same() {
        use crate::ir::{Graph, Tensor, ValueDef};
        use crate::ops::elementwise::{Elementwise, Func};
        use crate::passes::test_graph::{conv_1x1, push, value};
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 1, 2, 2], ValueDef::Input(0));
        let c = conv_1x1(&mut g, x, -2.0);
        let y = value(&mut g, "y", &[1, 1, 2, 2], ValueDef::Computed);
        push(&mut g, "relu", Elementwise { op_type: "Relu", func: Func::Relu }, &[c], y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        let input = Tensor::from_f32s(vec![1, 1, 2, 2], &[1.0, -1.0, 2.0, -3.0]);
        let plan = crate::plan::plan(&g).expect("plan");
        let profiled = crate::jit::compile_profiled(&g, &plan, &crate::limits::Limits::default()).expect("compile");
        take(0);
        let got = profiled.run(std::slice::from_ref(&input)).expect("run");
        let nanos = take(g.nodes.len());
        assert_eq!(got, crate::jit::compile(&g, &plan).expect("compile").run(&[input]).expect("run"));
        assert_eq!(nanos.len(), 2);
        assert!(nanos.iter().sum::<u64>() > 0, "{nanos:?}");
    }

    #[test]
    fn a_node_before_the_entry_call_is_not_charged() {
        take(0);
        onnxc_profile_node(0);
        assert_eq!(take(1), vec![0]);
    }
}
