#!/usr/bin/env python3
"""Make test cases for map values (ai.onnx.ml ZipMap): small models built here
with onnx.helper, reference outputs from ONNX Runtime.

Usage: make_map_cases.py OUT_DIR     (OUT_DIR is normally tests/data)

Writes OUT_DIR/maps/<case>/ in the backend-test layout:
  model.onnx
  test_data_set_0/input_K.pb     TensorProto, numpy default_rng(7) values
  test_data_set_0/output_K.pb    ONNX Runtime's result (CPUExecutionProvider,
                                 one thread): a SequenceProto of MapProtos
                                 (values one scalar tensor each, as
                                 numpy_helper.from_dict writes them) for a
                                 seq(map) output, else a TensorProto

  test_data_set_0/input_K.pb     a MapProto for a map input

Cases:
  zipmap_int64     probabilities float[3, 4] -> ZipMap classlabels_int64s
  zipmap_strings   Softmax(x float[2, 3]) -> ZipMap classlabels_strings, and
                   ArgMax of the same scores as a second (tensor) output
  dictvectorizer_* map(int64, float), map(string, float) (ONNX Runtime's Python
                   binding feeds maps of float values only)
  castmap_*        map(int64, float) -> CastMap DENSE to float, SPARSE to
                   int64 with max_map 10 (key 12 past it, skipped)
                   -> DictVectorizer (keys missing from the vocabulary and
                   vocabulary words missing from the map included)
"""

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def seq_of_maps(name, key_type):
    value = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_map_type_proto(key_type, value)))


def zipmap(labels):
    if isinstance(labels[0], str):
        return helper.make_node("ZipMap", ["p"], ["maps"], domain="ai.onnx.ml", classlabels_strings=labels)
    return helper.make_node("ZipMap", ["p"], ["maps"], domain="ai.onnx.ml", classlabels_int64s=labels)


def model(nodes, inputs, outputs):
    graph = helper.make_graph(nodes, "maps", inputs, outputs)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="onnxc make_map_cases.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def cases(rng):
    labels = [10, -2, 7, 3]
    m = model(
        [zipmap(labels)],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [3, 4])],
        [seq_of_maps("maps", TensorProto.INT64)],
    )
    yield "zipmap_int64", m, {"p": rng.random((3, 4), dtype=np.float32)}

    labels = ["cat", "dog", "ünïcode"]
    m = model(
        [
            helper.make_node("Softmax", ["x"], ["p"], axis=1),
            zipmap(labels),
            helper.make_node("ArgMax", ["p"], ["best"], axis=1, keepdims=0),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [seq_of_maps("maps", TensorProto.STRING), helper.make_tensor_value_info("best", TensorProto.INT64, [2])],
    )
    yield "zipmap_strings", m, {"x": rng.standard_normal((2, 3), dtype=np.float32)}

    for key, vocabulary, value_type, entries in [
        (TensorProto.INT64, [3, 1, 9, 4, -5], TensorProto.FLOAT, {1: 2.5, 9: -1.0, 7: 5.0, -5: 0.25}),
        (TensorProto.STRING, ["b", "a", "zz", "ü"], TensorProto.FLOAT, {"zz": 1.5, "q": 2.0, "ü": -3.0}),
    ]:
        attribute = "string_vocabulary" if key == TensorProto.STRING else "int64_vocabulary"
        vectorize = helper.make_node("DictVectorizer", ["m"], ["y"], domain="ai.onnx.ml", **{attribute: vocabulary})
        value = helper.make_tensor_type_proto(value_type, None)
        m = model(
            [vectorize],
            [helper.make_value_info("m", helper.make_map_type_proto(key, value))],
            [helper.make_tensor_value_info("y", value_type, [1, len(vocabulary)])],
        )
        numpy_type = helper.tensor_dtype_to_np_dtype(value_type)
        name = f"dictvectorizer_{TensorProto.DataType.Name(key).lower()}_{TensorProto.DataType.Name(value_type).lower()}"
        yield name, m, {"m": {k: numpy_type.type(v) for k, v in entries.items()}}

    entries = {9: 2.5, 1: -1.75, 4: 5.0, 0: 0.5, 12: 3.0}
    for cast_to, form, out_type, width in [
        ("TO_FLOAT", "DENSE", TensorProto.FLOAT, len(entries)),
        ("TO_INT64", "SPARSE", TensorProto.INT64, 10),
    ]:
        attributes = {"cast_to": cast_to, "map_form": form}
        if form == "SPARSE":
            attributes["max_map"] = width
        cast = helper.make_node("CastMap", ["m"], ["y"], domain="ai.onnx.ml", **attributes)
        value = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
        m = model(
            [cast],
            [helper.make_value_info("m", helper.make_map_type_proto(TensorProto.INT64, value))],
            [helper.make_tensor_value_info("y", out_type, [1, width])],
        )
        yield f"castmap_{form.lower()}_{cast_to[3:].lower()}", m, {"m": {k: np.float32(v) for k, v in entries.items()}}


def map_proto(d, name=""):
    """A MapProto as numpy_helper.from_dict writes it (one scalar tensor per
    value), built by hand: from_dict cannot type string keys."""
    m = onnx.MapProto(name=name)
    keys = list(d.keys())
    if isinstance(keys[0], str):
        m.key_type = TensorProto.STRING
        m.string_keys.extend(k.encode() for k in keys)
    else:
        m.key_type = TensorProto.INT64
        m.keys.extend(keys)
    m.values.CopyFrom(numpy_helper.from_list([np.asarray(v) for v in d.values()]))
    return m


def write_output(path, name, value):
    if isinstance(value, list):
        proto = onnx.SequenceProto(name=name, elem_type=onnx.SequenceProto.MAP)
        proto.map_values.extend(map_proto({k: np.float32(v) for k, v in d.items()}) for d in value)
    else:
        proto = numpy_helper.from_array(np.asarray(value), name)
    path.write_bytes(proto.SerializeToString())


def main():
    out = Path(sys.argv[1]) / "maps"
    rng = np.random.default_rng(7)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    for name, m, feeds in cases(rng):
        case = out / name
        data = case / "test_data_set_0"
        data.mkdir(parents=True, exist_ok=True)
        (case / "model.onnx").write_bytes(m.SerializeToString())
        session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for k, (input_name, value) in enumerate(feeds.items()):
            proto = map_proto(value, input_name) if isinstance(value, dict) else numpy_helper.from_array(value, input_name)
            (data / f"input_{k}.pb").write_bytes(proto.SerializeToString())
        results = session.run(None, feeds)
        for k, (output, value) in enumerate(zip(session.get_outputs(), results)):
            write_output(data / f"output_{k}.pb", output.name, value)
        print(f"wrote {case}")


if __name__ == "__main__":
    main()
