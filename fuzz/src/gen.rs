//! Random small models of supported operators, drawn from [`Choices`]:
//! f32 graph inputs of rank 1 to 4, then a few nodes, each reading values
//! made so far (or new initializers) with shapes the generator tracks so
//! that most models are valid, and attributes drawn near their edges
//! (strides, pads, dilations, ceil_mode, negative axes, steps...). Invalid
//! combinations still happen; the compiler must reject them cleanly.

use crate::choices::{Choices, Rng};
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::type_proto::{self, Tensor as TensorType};
use onnx_proto::*;

/// A generated model and the values of its inputs.
pub struct Generated {
    pub model: ModelProto,
    /// (shape, data) per graph input, in order.
    pub inputs: Vec<(Vec<usize>, Vec<f32>)>,
}

struct Value {
    name: String,
    shape: Vec<usize>,
}

struct Builder<'c, 'd> {
    c: &'c mut Choices<'d>,
    rng: Rng,
    values: Vec<Value>,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    count: usize,
}

pub fn model(data: &[u8]) -> Generated {
    let mut c = Choices::new(data);
    let rng = Rng::new(c.seed());
    let mut b = Builder { c: &mut c, rng, values: Vec::new(), nodes: Vec::new(), inits: Vec::new(), count: 0 };
    let mut inputs = Vec::new();
    let mut graph_inputs = Vec::new();
    for k in 0..b.c.range(1, 2) {
        let rank = b.c.range(1, 4);
        let shape: Vec<usize> = (0..rank).map(|_| b.c.range(1, 5)).collect();
        let n = shape.iter().product();
        inputs.push((shape.clone(), (0..n).map(|_| b.rng.next_f32() * 2.0).collect()));
        let name = format!("in{k}");
        graph_inputs.push(value_info(&name, &shape));
        b.values.push(Value { name, shape });
    }
    for _ in 0..b.c.range(1, 6) {
        b.node();
    }
    let last = b.values.len() - 1;
    let mut outs = vec![last];
    if b.c.flag() && last > 0 {
        outs.insert(0, b.c.below(last));
    }
    let outputs = outs.iter().map(|&i| symbolic(&b.values[i].name, b.values[i].shape.len())).collect();
    let graph = GraphProto {
        name: Some("fuzz".into()),
        node: b.nodes,
        input: graph_inputs,
        output: outputs,
        initializer: b.inits,
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    };
    Generated { model, inputs }
}

fn dims_proto(dims: impl Iterator<Item = dimension::Value>) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(TensorType {
            elem_type: Some(1),
            shape: Some(TensorShapeProto {
                dim: dims.map(|v| Dimension { value: Some(v), denotation: None }).collect(),
            }),
        })),
        denotation: None,
    }
}

fn value_info(name: &str, shape: &[usize]) -> ValueInfoProto {
    let dims = shape.iter().map(|&d| dimension::Value::DimValue(d as i64));
    ValueInfoProto { name: Some(name.into()), r#type: Some(dims_proto(dims)), ..Default::default() }
}

/// An output of rank `rank` whose dims the compiler infers.
fn symbolic(name: &str, rank: usize) -> ValueInfoProto {
    let dims = (0..rank).map(|i| dimension::Value::DimParam(format!("{name}_{i}")));
    ValueInfoProto { name: Some(name.into()), r#type: Some(dims_proto(dims)), ..Default::default() }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

const UNARY: &[&str] = &[
    "Relu",
    "Sigmoid",
    "Tanh",
    "Abs",
    "Neg",
    "Exp",
    "Sqrt",
    "Softplus",
    "Erf",
    "Floor",
    "Round",
    "Reciprocal",
    "Sign",
];
const BINARY: &[&str] = &["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"];

impl Builder<'_, '_> {
    fn fresh(&mut self) -> String {
        self.count += 1;
        format!("v{}", self.count)
    }

    /// An f32 initializer of `shape` with random values.
    fn weight(&mut self, shape: &[usize]) -> String {
        let name = self.fresh();
        let n: usize = shape.iter().product();
        let raw = (0..n).flat_map(|_| self.rng.next_f32().to_le_bytes()).collect();
        self.inits.push(TensorProto {
            name: Some(name.clone()),
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: Some(1),
            raw_data: Some(raw),
            ..Default::default()
        });
        name
    }

    fn int64s(&mut self, v: &[i64]) -> String {
        let name = self.fresh();
        self.inits.push(TensorProto {
            name: Some(name.clone()),
            dims: vec![v.len() as i64],
            data_type: Some(7),
            int64_data: v.to_vec(),
            ..Default::default()
        });
        name
    }

    /// Adds `op(inputs) -> out` with `attrs`; `shape` is the output's
    /// expected shape (what later nodes plan around).
    fn push(&mut self, op: &str, inputs: Vec<String>, mut attrs: Vec<AttributeProto>, shape: Vec<usize>) {
        // Now and then one integer attribute takes an extreme value: the
        // compiler must reject it cleanly (or cope), never overflow.
        if !attrs.is_empty() && self.c.below(16) == 0 {
            let k = self.c.below(attrs.len());
            let v = *self.c.pick(&[i64::MAX, i64::MIN, -1, 0, 1 << 32, i64::MAX / 2, -(1 << 40)]);
            let a = &mut attrs[k];
            match a.ints.len() {
                0 if a.i.is_some() => a.i = Some(v),
                0 => {}
                n => a.ints[self.c.below(n)] = v,
            }
        }
        let out = self.fresh();
        self.nodes.push(NodeProto {
            op_type: Some(op.into()),
            name: Some(format!("{op}_{}", self.nodes.len())),
            input: inputs,
            output: vec![out.clone()],
            attribute: attrs,
            ..Default::default()
        });
        self.values.push(Value { name: out, shape });
    }

    /// An axis of `rank`, sometimes negative.
    fn axis(&mut self, rank: usize) -> i64 {
        let a = self.c.below(rank) as i64;
        if self.c.flag() {
            a - rank as i64
        } else {
            a
        }
    }

    fn node(&mut self) {
        let i = self.c.below(self.values.len());
        let (x, shape) = (self.values[i].name.clone(), self.values[i].shape.clone());
        // Scalars and empty tensors take the elementwise operators only.
        let choices = if shape.is_empty() || shape.contains(&0) { 4 } else { 16 };
        match self.c.below(choices) {
            0 | 1 => {
                let op = *self.c.pick(UNARY);
                self.push(op, vec![x], vec![], shape);
            }
            2 | 3 => self.binary(x, shape),
            4 => self.matmul(x, shape),
            5 => self.conv(x, shape),
            6 => self.pool(x, shape),
            7 => {
                let op = *self.c.pick(&["Softmax", "LogSoftmax"]);
                let axis = self.axis(shape.len());
                self.push(op, vec![x], vec![int("axis", axis)], shape);
            }
            8 => self.transpose(x, shape),
            9 => self.reshape(x, shape),
            10 => self.slice(x, shape),
            11 => self.reduce(x, shape),
            12 => self.pad(x, shape),
            13 => self.concat(x, shape),
            14 => self.gather(x, shape),
            _ => self.normalize(x, shape),
        }
    }

    /// A shape `shape` broadcasts with: a suffix, some dims set to 1.
    fn broadcastable(&mut self, shape: &[usize]) -> Vec<usize> {
        let keep = self.c.below(shape.len() + 1);
        shape[shape.len() - keep..].iter().map(|&d| if self.c.flag() { 1 } else { d }).collect()
    }

    fn binary(&mut self, x: String, shape: Vec<usize>) {
        let op = *self.c.pick(BINARY);
        let other = match self.values.iter().position(|v| v.shape == shape && v.name != x) {
            Some(j) if self.c.flag() => self.values[j].name.clone(),
            _ => {
                let s = if op == "PRelu" { vec![1] } else { self.broadcastable(&shape) };
                self.weight(&s)
            }
        };
        let (a, b) = if self.c.flag() && op != "PRelu" { (other, x) } else { (x, other) };
        self.push(op, vec![a, b], vec![], shape);
    }

    fn matmul(&mut self, x: String, shape: Vec<usize>) {
        let k = *shape.last().unwrap_or(&1);
        let n = self.c.range(1, 6);
        if shape.len() == 2 && self.c.flag() {
            let trans_b = self.c.flag();
            let w = self.weight(&if trans_b { [n, k] } else { [k, n] });
            let bias = self.weight(&[n]);
            let attrs =
                vec![int("transB", trans_b as i64), float("alpha", self.c.value()), float("beta", self.c.value())];
            self.push("Gemm", vec![x, w, bias], attrs, vec![shape[0], n]);
            return;
        }
        let w = self.weight(&[k, n]);
        let mut out = shape.clone();
        if let Some(l) = out.last_mut() {
            *l = n;
        }
        self.push("MatMul", vec![x, w], vec![], out);
    }

    /// Window attributes for `spatial` dims with kernel `k`: (attrs, output dims).
    fn window(&mut self, spatial: &[usize], k: &[usize], ceil: bool) -> (Vec<AttributeProto>, Vec<usize>) {
        let r = spatial.len();
        let s: Vec<usize> = (0..r).map(|_| self.c.range(1, 3)).collect();
        let d: Vec<usize> = (0..r).map(|_| if ceil { 1 } else { self.c.range(1, 2) }).collect();
        let p: Vec<usize> = (0..2 * r).map(|i| self.c.below(k[i % r].min(3))).collect();
        let ceil_mode = ceil && self.c.flag();
        let mut out = Vec::with_capacity(r);
        for i in 0..r {
            let span = (k[i] - 1) * d[i] + 1;
            let padded = spatial[i] + p[i] + p[r + i];
            let o = if padded < span {
                0
            } else if ceil_mode {
                let o = (padded - span).div_ceil(s[i]) + 1;
                if (o - 1) * s[i] >= spatial[i] + p[i] {
                    o - 1
                } else {
                    o
                }
            } else {
                (padded - span) / s[i] + 1
            };
            out.push(o);
        }
        let as_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        let mut attrs = vec![ints("strides", &as_i64(&s)), ints("pads", &as_i64(&p))];
        if !ceil {
            attrs.push(ints("dilations", &as_i64(&d)));
        }
        if ceil_mode {
            attrs.push(int("ceil_mode", 1));
        }
        if self.c.below(4) == 0 {
            // auto_pad instead: SAME_* gives ceil(in / stride) per dim.
            attrs.retain(|a| a.name() != "pads");
            let mode = *self.c.pick(&["SAME_UPPER", "SAME_LOWER", "VALID"]);
            attrs.push(string("auto_pad", mode));
            out = (0..r)
                .map(|i| match mode {
                    "VALID" => (spatial[i] + 1).saturating_sub((k[i] - 1) * d[i] + 1).div_ceil(s[i]),
                    _ => spatial[i].div_ceil(s[i]),
                })
                .collect();
        }
        (attrs, out)
    }

    fn conv(&mut self, x: String, shape: Vec<usize>) {
        if shape.len() < 3 {
            return self.push("Relu", vec![x], vec![], shape);
        }
        let c = shape[1];
        let group = if c.is_multiple_of(2) && self.c.flag() { 2 } else { 1 };
        let m = group * self.c.range(1, 3);
        let k: Vec<usize> = shape[2..].iter().map(|&d| self.c.range(1, d.min(3))).collect();
        let mut w_shape = vec![m, c / group];
        w_shape.extend(&k);
        let w = self.weight(&w_shape);
        let (mut attrs, spatial) = self.window(&shape[2..], &k, false);
        attrs.push(int("group", group as i64));
        let mut inputs = vec![x, w];
        if self.c.flag() {
            inputs.push(self.weight(&[m]));
        }
        let mut out = vec![shape[0], m];
        out.extend(spatial);
        self.push("Conv", inputs, attrs, out);
    }

    fn pool(&mut self, x: String, shape: Vec<usize>) {
        if shape.len() < 3 {
            return self.push("Relu", vec![x], vec![], shape);
        }
        let op = *self.c.pick(&["MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool"]);
        let mut out = shape[..2].to_vec();
        if op.starts_with("Global") {
            out.extend(vec![1; shape.len() - 2]);
            return self.push(op, vec![x], vec![], out);
        }
        let k: Vec<usize> = shape[2..].iter().map(|&d| self.c.range(1, d.min(3))).collect();
        let (mut attrs, spatial) = self.window(&shape[2..], &k, op != "LpPool");
        attrs.push(ints("kernel_shape", &k.iter().map(|&v| v as i64).collect::<Vec<_>>()));
        if op == "AveragePool" && self.c.flag() {
            attrs.push(int("count_include_pad", 1));
        }
        out.extend(spatial);
        self.push(op, vec![x], attrs, out);
    }

    fn transpose(&mut self, x: String, shape: Vec<usize>) {
        let mut perm: Vec<usize> = (0..shape.len()).collect();
        for i in (1..perm.len()).rev() {
            let j = self.c.below(i + 1);
            perm.swap(i, j);
        }
        let out = perm.iter().map(|&p| shape[p]).collect();
        let perm: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
        self.push("Transpose", vec![x], vec![ints("perm", &perm)], out);
    }

    fn reshape(&mut self, x: String, shape: Vec<usize>) {
        let n: usize = shape.iter().product();
        let a = (1..=n).filter(|&d| n.is_multiple_of(d)).nth(self.c.below(4)).unwrap_or(1);
        let (target, out) =
            if self.c.flag() { (vec![a as i64, -1], vec![a, n / a]) } else { (vec![n as i64], vec![n]) };
        let t = self.int64s(&target);
        self.push("Reshape", vec![x, t], vec![], out);
    }

    fn slice(&mut self, x: String, shape: Vec<usize>) {
        let axis = self.c.below(shape.len());
        let dim = shape[axis] as i64;
        let step = *self.c.pick(&[1i64, 2, -1, -2]);
        let (start, end) =
            (self.c.range(0, shape[axis]) as i64 - self.c.below(2) as i64 * dim, self.c.range(0, 6) as i64 - 3);
        let end = if step > 0 { dim + end } else { end - dim };
        let len = if step > 0 {
            let (s, e) = (start.clamp(0, dim), end.clamp(0, dim));
            ((e - s).max(0) + step - 1) / step
        } else {
            let (s, e) = (start.clamp(-1, dim - 1), end.clamp(-1, dim - 1));
            ((s - e).max(0) - step - 1) / -step
        };
        let mut out = shape.clone();
        out[axis] = len.max(0) as usize;
        let inputs =
            vec![x, self.int64s(&[start]), self.int64s(&[end]), self.int64s(&[axis as i64]), self.int64s(&[step])];
        self.push("Slice", inputs, vec![], out);
    }

    fn reduce(&mut self, x: String, shape: Vec<usize>) {
        let op = *self.c.pick(&["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"]);
        let axis = self.c.below(shape.len());
        let keep = self.c.flag();
        let mut out = shape.clone();
        if keep {
            out[axis] = 1;
        } else {
            out.remove(axis);
        }
        let mut attrs = vec![int("keepdims", keep as i64)];
        let mut inputs = vec![x];
        if op == "ReduceSum" {
            inputs.push(self.int64s(&[axis as i64]));
        } else {
            attrs.push(ints("axes", &[axis as i64]));
        }
        self.push(op, inputs, attrs, out);
    }

    fn pad(&mut self, x: String, shape: Vec<usize>) {
        let r = shape.len();
        let mode = *self.c.pick(&["constant", "reflect", "edge"]);
        let pads: Vec<i64> = (0..2 * r)
            .map(|i| {
                let most = if mode == "reflect" { shape[i % r] - 1 } else { 2 };
                self.c.range(0, most.min(2)) as i64
            })
            .collect();
        let out = (0..r).map(|i| shape[i] + (pads[i] + pads[r + i]) as usize).collect();
        let p = self.int64s(&pads);
        self.push("Pad", vec![x, p], vec![string("mode", mode)], out);
    }

    fn concat(&mut self, x: String, shape: Vec<usize>) {
        let axis = self.c.below(shape.len());
        let mut other = shape.clone();
        other[axis] = self.c.range(1, 3);
        let w = self.weight(&other);
        let mut out = shape.clone();
        out[axis] += other[axis];
        let a = if self.c.flag() { axis as i64 - shape.len() as i64 } else { axis as i64 };
        self.push("Concat", vec![x, w], vec![int("axis", a)], out);
    }

    fn gather(&mut self, x: String, shape: Vec<usize>) {
        let axis = self.c.below(shape.len());
        let n = self.c.range(1, 3);
        let idx: Vec<i64> =
            (0..n).map(|_| self.c.below(shape[axis]) as i64 - self.c.below(2) as i64 * shape[axis] as i64).collect();
        let i = self.int64s(&idx);
        let mut out = shape.clone();
        out[axis] = n;
        self.push("Gather", vec![x, i], vec![int("axis", axis as i64)], out);
    }

    fn normalize(&mut self, x: String, shape: Vec<usize>) {
        if shape.len() >= 2 && self.c.flag() {
            let c = shape[1];
            let mut inputs = vec![x];
            for _ in 0..3 {
                inputs.push(self.weight(&[c]));
            }
            // The variance: positive, so results are numbers to compare.
            inputs.push(self.weight(&[c]));
            if let Some(raw) = self.inits.last_mut().and_then(|t| t.raw_data.as_mut()) {
                for b in raw.chunks_exact_mut(4) {
                    let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]).abs() + 0.5;
                    b.copy_from_slice(&v.to_le_bytes());
                }
            }
            return self.push("BatchNormalization", inputs, vec![float("epsilon", 1e-3)], shape);
        }
        let axis = self.axis(shape.len());
        let norm = shape.len() - if axis < 0 { (axis + shape.len() as i64) as usize } else { axis as usize };
        let scale = self.weight(&shape[shape.len() - norm..]);
        self.push("LayerNormalization", vec![x, scale], vec![int("axis", axis)], shape);
    }
}
