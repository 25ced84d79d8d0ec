//! The mid-IR: one graph of typed values and operator nodes.
//!
//! Design notes (after naga and Cranelift):
//! - Values and nodes live in arenas and are named by typed handles
//!   (`ValueId`); nodes are kept in a valid schedule (topological) order.
//! - Operators are the closed enum [`crate::ops::Op`] with typed attribute
//!   structs, parsed once at import. No ONNX proto type exists here.
//! - A value is a graph input, a constant, or computed by exactly one node.
//! - After `infer`, every value has a type with a known shape.

pub mod attributes;
pub mod dim_expr;
pub mod dtype;
mod print;
pub mod shape;
pub mod tensor;

pub use dtype::DType;
pub use shape::{Dim, TensorType};
pub use tensor::Tensor;

use crate::ops::Op;
use std::fmt;

/// Handle of a value in [`Graph::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug)]
pub enum ValueDef {
    /// The k-th graph input.
    Input(usize),
    /// A tensor inside the k-th graph input, a sequence or optional
    /// (`CompositeType`): element `element` of the sequence, or (`None`)
    /// the optional's tensor. Its address is read from the caller's
    /// descriptor, whose count and dims the code checks first.
    InputElement { input: usize, element: Option<usize> },
    /// Known at compile time: an initializer, a Constant, or a folded result.
    Const(Tensor),
    /// Produced by a node.
    Computed,
}

#[derive(Clone, Debug)]
pub struct Value {
    /// The ONNX name, kept for messages and the textual form.
    pub name: String,
    pub ty: Option<TensorType>,
    pub def: ValueDef,
}

#[derive(Clone, Debug)]
pub struct Node {
    /// The ONNX node name, or a generated one when the model has none.
    pub name: String,
    pub op: Op,
    /// `None` marks an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
}

impl Node {
    /// A label for messages: `node "conv_3" (Conv)`.
    pub fn label(&self) -> String {
        format!("node \"{}\" ({})", self.name, self.op.name())
    }
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub values: Vec<Value>,
    /// In schedule order.
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    /// Sequence and optional values, known element by element at compile
    /// time: they exist only during inference, which resolves every
    /// operator on them into operators on their tensors.
    pub composites: std::collections::HashMap<ValueId, Composite>,
    /// The declared types of graph inputs and outputs that are sequences
    /// or optionals (the others are tensors, typed by [`Value::ty`]).
    pub port_types: std::collections::HashMap<ValueId, CompositeType>,
    /// The element types of graph outputs declared as tensors, which
    /// `infer` checks the computed types against (a declared shape is not
    /// needed: inference gives it).
    pub output_dtypes: std::collections::HashMap<ValueId, DType>,
    /// Symbolic inference only: the elements, as expressions, of the small
    /// integer values computed from symbolic dims (Shape's output and what
    /// computes on it). Empty after static inference.
    pub dim_values: std::collections::HashMap<ValueId, Vec<dim_expr::DimExpr>>,
    /// Present when the graph is compiled for a range of sizes: the dims
    /// of its values of symbolic shape (their types hold the upper bounds).
    pub symbolic: Option<dim_expr::SymbolicShapes>,
    /// What import took in its stride and the user should hear of (a dim
    /// declared negative, taken as a symbol); the driver prints them.
    pub warnings: Vec<String>,
}

/// A sequence of tensors, an optional tensor, or an optional sequence of
/// tensors, as a graph input or output declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct CompositeType {
    pub optional: bool,
    pub sequence: bool,
    /// The element type of the tensors it holds.
    pub dtype: DType,
    /// Their declared dims (may be symbolic), when the rank is declared.
    pub shape: Option<Vec<Dim>>,
    /// A map (or, with `sequence`, a sequence of maps) from keys of this
    /// type (int64 or string) to `dtype` values, instead of tensors
    /// (ai.onnx.ml's ZipMap output, DictVectorizer's input).
    pub map_key: Option<DType>,
}

impl fmt::Display for CompositeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let element = match &self.shape {
            Some(shape) => TensorType { dtype: self.dtype, shape: shape.clone() }.to_string(),
            None => format!("{}[?]", self.dtype),
        };
        match (self.map_key, self.sequence) {
            (Some(key), true) => return write!(f, "seq(map({key}, {}))", self.dtype),
            (Some(key), false) => return write!(f, "map({key}, {})", self.dtype),
            _ => {}
        }
        match (self.optional, self.sequence) {
            (true, true) => write!(f, "optional(seq({element}))"),
            (true, false) => write!(f, "optional({element})"),
            _ => write!(f, "seq({element})"),
        }
    }
}

/// A sequence or optional value made of (tensor or composite) values.
#[derive(Clone, Debug, PartialEq)]
pub enum Composite {
    Sequence(Vec<ValueId>),
    Optional(Option<ValueId>),
    /// A sequence of maps, one per row of `values` (a `[N, C]` tensor, or
    /// `[C]` for one map), each from the `C` elements of `keys` to that
    /// row's elements: ZipMap's output (keys a constant), or a map graph
    /// input (`[C]` keys and values given by the caller).
    MapRows {
        keys: ValueId,
        values: ValueId,
    },
}

impl Graph {
    pub fn add_value(&mut self, name: impl Into<String>, ty: Option<TensorType>, def: ValueDef) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value { name: name.into(), ty, def });
        id
    }

    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.index()]
    }

    pub fn const_value(&self, id: ValueId) -> Option<&Tensor> {
        match &self.value(id).def {
            ValueDef::Const(t) => Some(t),
            _ => None,
        }
    }

    /// The tensors a sequence or optional holds, in order, looking
    /// through an optional into the sequence it holds (the keys and the
    /// values of a sequence of maps); empty for a tensor.
    pub fn composite_tensors(&self, v: ValueId) -> Vec<ValueId> {
        match self.composites.get(&v) {
            None => Vec::new(),
            Some(Composite::Sequence(items)) => items.clone(),
            Some(Composite::Optional(None)) => Vec::new(),
            Some(Composite::Optional(Some(inner))) if self.composites.contains_key(inner) => {
                self.composite_tensors(*inner)
            }
            Some(Composite::Optional(Some(inner))) => vec![*inner],
            Some(Composite::MapRows { keys, values }) => vec![*keys, *values],
        }
    }

    /// The concrete type of a value; valid after `infer`.
    pub fn concrete(&self, id: ValueId) -> Option<(DType, Vec<usize>)> {
        let ty = self.value(id).ty.as_ref()?;
        Some((ty.dtype, ty.known_shape()?))
    }
}
