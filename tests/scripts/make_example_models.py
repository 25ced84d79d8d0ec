"""Writes the small models the examples and end-to-end tests compile.

tests/data/examples/cnn/: an MNIST-shaped CNN (Conv-Relu-MaxPool-Conv-Relu-
GlobalAveragePool-Flatten-Gemm-Softmax) with seeded random weights, in the
backend-test layout (model.onnx, test_data_set_0/input_0.pb, output_0.pb with
ONNX Runtime's output), plus input.bin / expected.bin (raw little-endian f32)
for the C example.
"""

import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def cnn(rng):
    def weight(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        weight("w1", (8, 1, 3, 3), 0.5),
        weight("b1", (8,), 0.1),
        weight("w2", (16, 8, 3, 3), 0.2),
        weight("b2", (16,), 0.1),
        weight("w3", (10, 16), 0.5),
        weight("b3", (10,), 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mnist_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxc-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(data):
    rng = np.random.default_rng(7)
    case = pathlib.Path(data) / "examples" / "cnn"
    (case / "test_data_set_0").mkdir(parents=True, exist_ok=True)
    model = cnn(rng)
    onnx.save(model, case / "model.onnx")
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"image": x})
    (case / "test_data_set_0" / "input_0.pb").write_bytes(numpy_helper.from_array(x, "image").SerializeToString())
    (case / "test_data_set_0" / "output_0.pb").write_bytes(numpy_helper.from_array(y, "probs").SerializeToString())
    (case / "input.bin").write_bytes(x.astype("<f4").tobytes())
    (case / "expected.bin").write_bytes(y.astype("<f4").tobytes())
    print(f"examples/cnn: output {list(y.shape)}, argmax {int(y.argmax())}")


if __name__ == "__main__":
    main(sys.argv[1])
