//! The textual mid-IR: what `onnxc compile --emit mir` writes and the
//! suite's snapshots compare, so it is stable (the same graph always
//! prints the same bytes: arena and schedule order, never hash order or
//! addresses) and meant to be read:
//!
//! ```text
//! graph(%x: f32[2,3]) {
//!   %w = const f32[3,2] [1.0, -2.0, 0.5, 0.25, -1.5, 3.0]
//!   %b = const f32[2] [0.5, -0.75]
//!   %y = Gemm<alpha=1.0, beta=1.0, trans_a=false, trans_b=false>(%x, %w, %b) : f32[2,2]
//!   return %y : f32[2,2]
//! }
//! ```
//!
//! One line per tensor of a composite input, per constant some node reads
//! and per node, in schedule order; an omitted input is `_`, a name other
//! than letters, digits and `_.-$` is quoted, and names are ONNX's (an
//! expansion may repeat one). Attributes come from
//! [`crate::ops::Operator::attributes`]. A constant shows its first
//! [`CONST_HEAD`] elements and, when it has more, an FNV-1a digest of its
//! bytes, so a changed weight changes the text without the text holding
//! the weights. Subgraphs (before inference expands them) follow their
//! node, indented and named by their attribute.

use super::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::control::Subgraph;
use std::fmt::{self, Write};

/// Elements of a constant the text shows.
pub const CONST_HEAD: usize = 8;

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inputs: Vec<String> = self.inputs.iter().map(|&v| self.typed(v)).collect();
        writeln!(f, "graph({}) {{", inputs.join(", "))?;
        self.write_sources(f)?;
        self.write_nodes(f, &self.nodes, 1)?;
        writeln!(f, "  {}", self.returned(&self.outputs))?;
        writeln!(f, "}}")
    }
}

impl Graph {
    /// The tensors inside composite inputs, and the constants some node or
    /// output reads (folding leaves the others behind), in arena order.
    fn write_sources(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut used = vec![false; self.values.len()];
        self.mark_used(&self.nodes, &self.outputs, &mut used);
        for (i, value) in self.values.iter().enumerate() {
            let v = ValueId(i as u32);
            match &value.def {
                ValueDef::Const(t) if used[i] => writeln!(f, "  {} = const {}", self.name(v), constant(t))?,
                ValueDef::InputElement { input, element } => {
                    let at = element.map_or(String::new(), |e| format!(", {e}"));
                    let composite = self.name(self.inputs[*input]);
                    writeln!(f, "  {} = element({composite}{at}) : {}", self.name(v), self.ty(v))?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Sets `used` for every value `nodes` (and their subgraphs) or
    /// `outputs` read.
    fn mark_used(&self, nodes: &[Node], outputs: &[ValueId], used: &mut [bool]) {
        for v in nodes.iter().flat_map(|n| n.inputs.iter().flatten()).chain(outputs) {
            used[v.index()] = true;
        }
        for (_, sub) in nodes.iter().flat_map(|n| n.op.subgraphs()) {
            self.mark_used(&sub.nodes, &sub.outputs, used);
        }
    }

    /// `nodes`, each with its subgraphs, at `depth` levels of indentation.
    fn write_nodes(&self, f: &mut fmt::Formatter<'_>, nodes: &[Node], depth: usize) -> fmt::Result {
        let indent = "  ".repeat(depth);
        for node in nodes {
            writeln!(f, "{indent}{}", self.node_line(node))?;
            for (name, sub) in node.op.subgraphs() {
                self.write_subgraph(f, name, sub, depth + 1)?;
            }
        }
        Ok(())
    }

    /// `name(%inputs) { nodes; return }`, as the node's attribute `name`.
    fn write_subgraph(&self, f: &mut fmt::Formatter<'_>, name: &str, sub: &Subgraph, depth: usize) -> fmt::Result {
        let indent = "  ".repeat(depth);
        let inputs: Vec<String> = sub.inputs.iter().map(|&v| self.typed(v)).collect();
        writeln!(f, "{indent}{name}({}) {{", inputs.join(", "))?;
        self.write_nodes(f, &sub.nodes, depth + 1)?;
        writeln!(f, "{indent}  {}", self.returned(&sub.outputs))?;
        writeln!(f, "{indent}}}")
    }

    /// `%a, %b = Op<attr=value>(%x, _) : f32[2], i64[2]`, or for a node
    /// without outputs (`Guard`, `EndGuard`) `Op<attr=value>(%x)`.
    fn node_line(&self, node: &Node) -> String {
        let outputs: Vec<String> = node.outputs.iter().map(|&v| self.name(v)).collect();
        let types: Vec<String> = node.outputs.iter().map(|&v| self.ty(v)).collect();
        let inputs: Vec<String> = node.inputs.iter().map(|i| i.map_or("_".to_string(), |v| self.name(v))).collect();
        let attributes: Vec<String> = node.op.attributes().iter().map(ToString::to_string).collect();
        let mut line = String::new();
        if !outputs.is_empty() {
            let _ = write!(line, "{} = ", outputs.join(", "));
        }
        line.push_str(node.op.name());
        if !attributes.is_empty() {
            let _ = write!(line, "<{}>", attributes.join(", "));
        }
        let _ = write!(line, "({})", inputs.join(", "));
        if !types.is_empty() {
            let _ = write!(line, " : {}", types.join(", "));
        }
        line
    }

    /// `return %y, %z : f32[2], i64[]`.
    fn returned(&self, outputs: &[ValueId]) -> String {
        let names: Vec<String> = outputs.iter().map(|&v| self.name(v)).collect();
        let types: Vec<String> = outputs.iter().map(|&v| self.ty(v)).collect();
        format!("return {} : {}", names.join(", "), types.join(", "))
    }

    fn name(&self, v: ValueId) -> String {
        value_name(&self.value(v).name)
    }

    /// `%x: f32[1,3]`.
    fn typed(&self, v: ValueId) -> String {
        format!("{}: {}", self.name(v), self.ty(v))
    }

    /// The declared sequence, optional or map type of a graph port, else
    /// the tensor type, `?` while unknown.
    fn ty(&self, v: ValueId) -> String {
        match (self.port_types.get(&v), &self.value(v).ty) {
            (Some(composite), _) => composite.to_string(),
            (None, Some(t)) => t.to_string(),
            (None, None) => "?".to_string(),
        }
    }
}

/// `%name`, quoted (`%"conv1/w:0"`) unless it is made of letters, digits
/// and `_ . - $` only.
fn value_name(name: &str) -> String {
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-$".contains(c));
    if plain {
        format!("%{name}")
    } else {
        format!("%{name:?}")
    }
}

/// `f32[2,2] [1.0, 2.0, 3.0, 4.0]`, or for more than [`CONST_HEAD`]
/// elements `f32[64,3] [..8 values.., …] fnv1a=0123456789abcdef`.
fn constant(t: &Tensor) -> String {
    let ty = TensorType::known(t.dtype, &t.shape);
    let head: Vec<String> = (0..t.len().min(CONST_HEAD)).map(|i| element(t, i)).collect();
    if t.len() <= CONST_HEAD {
        return format!("{ty} [{}]", head.join(", "));
    }
    format!("{ty} [{}, …] fnv1a={:016x}", head.join(", "), digest(t))
}

/// Element `i` of `t` as its type reads: `1.5`, `-3`, `true`, `"text"`.
fn element(t: &Tensor, i: usize) -> String {
    match t.dtype {
        DType::String => format!("{:?}", String::from_utf8_lossy(t.strings.get(i).map_or(&[], Vec::as_slice))),
        DType::Bool => (t.get_i64(i) != 0).to_string(),
        DType::F64 => format!("{:?}", t.get_f64(i)),
        DType::U64 => (t.get_i64(i) as u64).to_string(),
        d if d.is_float() || d.is_minifloat() => format!("{:?}", t.get_f64(i) as f32),
        _ => t.get_i64(i).to_string(),
    }
}

/// FNV-1a (64-bit) of a tensor's bytes and strings.
fn digest(t: &Tensor) -> u64 {
    let bytes = t.data.iter().chain(t.strings.iter().flatten());
    bytes.fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
    use crate::ops::control::{Guard, If, Subgraph};
    use crate::ops::shape_ops::Concat;
    use crate::ops::Op;

    fn value(g: &mut Graph, name: &str, dtype: DType, shape: &[usize], def: ValueDef) -> ValueId {
        g.add_value(name, Some(TensorType::known(dtype, shape)), def)
    }

    fn node(op: impl Into<Op>, inputs: &[ValueId], outputs: &[ValueId]) -> Node {
        let inputs = inputs.iter().map(|&v| Some(v)).collect();
        Node { name: "n".into(), op: op.into(), inputs, outputs: outputs.to_vec() }
    }

    /// An If (kept, as before inference) whose branches concatenate the
    /// input with a small or a large constant, then a Guard; one constant
    /// no node reads.
    fn sample() -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", DType::F32, &[2], ValueDef::Input(0));
        let c = value(&mut g, "cond 1", DType::Bool, &[], ValueDef::Input(1));
        let small = Tensor::from_f32s(vec![2], &[1.0, -2.5]);
        let k = value(&mut g, "k", DType::F32, &[2], ValueDef::Const(small));
        let large = Tensor::from_i64s(vec![10], &(0..10).collect::<Vec<i64>>());
        let big = value(&mut g, "big", DType::I64, &[10], ValueDef::Const(large));
        value(&mut g, "unread", DType::I64, &[1], ValueDef::Const(Tensor::from_i64s(vec![1], &[3])));
        let [t, e, y] = ["t", "e", "y"].map(|name| value(&mut g, name, DType::F32, &[4], ValueDef::Computed));
        let then_branch =
            Subgraph { inputs: vec![], nodes: vec![node(Concat { axis: 0 }, &[x, k], &[t])], outputs: vec![t] };
        let else_branch =
            Subgraph { inputs: vec![], nodes: vec![node(Concat { axis: -1 }, &[x, big], &[e])], outputs: vec![e] };
        let mut guard = node(Guard { when: true }, &[c], &[]);
        guard.inputs.push(None);
        g.nodes = vec![node(If { then_branch, else_branch }, &[c], &[y]), guard];
        g.inputs = vec![x, c];
        g.outputs = vec![y];
        g
    }

    #[test]
    fn a_graph_prints_line_by_line_with_subgraphs_indented() {
        let want = "\
graph(%x: f32[2], %\"cond 1\": bool[]) {
  %k = const f32[2] [1.0, -2.5]
  %big = const i64[10] [0, 1, 2, 3, 4, 5, 6, 7, …] fnv1a=133432d16e23d744
  %y = If(%\"cond 1\") : f32[4]
    then_branch() {
      %t = Concat<axis=0>(%x, %k) : f32[4]
      return %t : f32[4]
    }
    else_branch() {
      %e = Concat<axis=-1>(%x, %big) : f32[4]
      return %e : f32[4]
    }
  Guard<when=true>(%\"cond 1\", _)
  return %y : f32[4]
}
";
        assert_eq!(sample().to_string(), want);
    }
}
