"""Writes the broad benchmark suite: real architectures exported from PyTorch.

    python make_suite.py OUT_DIR [--only NAME,...]

For every model of CATALOGUE (architectures in models.py and torchvision),
writes OUT_DIR/<name>/ with
  model.onnx                    exported at opset 17 by torch.onnx (TorchScript
                                exporter), batch 1, every dim fixed
  test_data_set_0/input_K.pb    seeded inputs (images and features normal,
                                token ids uniform over the vocabulary, masks
                                with the last eighth padded)
  test_data_set_0/output_K.pb   ONNX Runtime's outputs on them (one thread)
so that `onnxc test OUT_DIR/<name>` checks onnxc on it and bench_vs_ort.py
times it. Weights are torch's default initialisation under a seed derived
from the model's name; BatchNorm statistics are calibrated on a random batch
(one forward pass in training mode with cumulative averaging), so that the
activations stay in range as trained ones would. Existing folders are kept
(delete one to remake it).
"""

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as m  # noqa: E402

tv = torchvision.models


def image(size):
    return ("image", (1, 3, size, size), "normal")


def tokens(vocab, seq):
    return [("input_ids", (1, seq), ("ids", vocab))]


def bert(vocab, d, layers, heads, seq):
    return (lambda: m.Bert(vocab, d, layers, heads, seq), [*tokens(vocab, seq), ("attention_mask", (1, seq), "mask")])


def gpt(vocab, d, layers, heads, seq):
    return (lambda: m.Gpt(vocab, d, layers, heads, seq), tokens(vocab, seq))


def rnn(cell, features, hidden, layers, steps, bidirectional=False):
    return (lambda: m.Recurrent(cell, features, hidden, layers, bidirectional), [("x", (steps, 1, features), "normal")])


def torchvision_net(factory, size=224):
    return (lambda: factory(weights=None), [image(size)])


def segmentation(factory, size):
    net = lambda: m.TorchvisionSegmentation(factory(weights=None, weights_backbone=None, num_classes=21))
    return (net, [image(size)])


# name -> (module factory, [(input name, shape, kind)])
CATALOGUE = {
    # transformer encoders, decoders, vision and audio transformers
    "bert_small_seq128": bert(30522, 256, 4, 4, 128),
    "bert_base_seq128": bert(30522, 768, 12, 12, 128),
    "bert_small_seq384": bert(30522, 256, 4, 4, 384),
    "gpt_small_seq64": gpt(8192, 256, 4, 4, 64),
    "gpt2_like_seq128": gpt(32000, 768, 6, 12, 128),
    "vit_tiny_224": (lambda: m.Vit(192, 12, 3), [image(224)]),
    "deit_small_224": (lambda: m.Vit(384, 12, 6), [image(224)]),
    "whisper_tiny_encoder_10s": (lambda: m.WhisperEncoder(), [("mel", (1, 80, 1000), "normal")]),
    # recurrent nets
    "lstm_2x128_t50": rnn("lstm", 64, 128, 2, 50),
    "gru_2x128_t50": rnn("gru", 64, 128, 2, 50),
    "lstm_64_t10": rnn("lstm", 32, 64, 1, 10),
    "gru_64_t10": rnn("gru", 32, 64, 1, 10),
    "bilstm_256_t100": rnn("lstm", 128, 256, 1, 100, True),
    "bigru_256_t100": rnn("gru", 128, 256, 1, 100, True),
    "lstm_512_t200": rnn("lstm", 256, 512, 1, 200),
    # CNN classifiers: SiLU, HardSwish, squeeze-excite, 5x5 and 7x7 depthwise
    "efficientnet_b0": torchvision_net(tv.efficientnet_b0),
    "mobilenet_v3_small": torchvision_net(tv.mobilenet_v3_small),
    "mobilenet_v3_large": torchvision_net(tv.mobilenet_v3_large),
    "mobilenet_v2": torchvision_net(tv.mobilenet_v2),
    "regnet_y_400mf": torchvision_net(tv.regnet_y_400mf),
    "resnet18": torchvision_net(tv.resnet18),
    "shufflenet_v2_x1_0": torchvision_net(tv.shufflenet_v2_x1_0),
    "mnasnet1_0": torchvision_net(tv.mnasnet1_0),
    "convnext_tiny": torchvision_net(tv.convnext_tiny),
    "mobilenet_k7": (lambda: m.MobileNetK7(), [image(224)]),
    # detection, segmentation, OCR
    "yolo_n_320": (lambda: m.Yolo(), [image(320)]),
    "yolo_n_640": (lambda: m.Yolo(), [image(640)]),
    "deeplabv3_mobilenet_v3_320": segmentation(tv.segmentation.deeplabv3_mobilenet_v3_large, 320),
    "lraspp_mobilenet_v3_320": segmentation(tv.segmentation.lraspp_mobilenet_v3_large, 320),
    "dbnet_resnet18_640": (lambda: m.DbNet(tv.resnet18(weights=None)), [image(640)]),
    "crnn_32x320": (lambda: m.Crnn(), [("image", (1, 1, 32, 320), "normal")]),
    # generators
    "style_transfer_resize_256": (lambda: m.StyleTransfer("resize"), [image(256)]),
    "style_transfer_deconv_256": (lambda: m.StyleTransfer("deconv"), [image(256)]),
    "dcgan_64": (lambda: m.Dcgan(), [("z", (1, 100, 1, 1), "normal")]),
    # 1-D audio
    "m5_16k": (lambda: m.M5(), [("wave", (1, 1, 16000), "normal")]),
    "kws_dsconv_k9": (lambda: m.KeywordSpotter(), [("mfcc", (1, 40, 101), "normal")]),
}


def make_input(shape, kind, rng):
    if kind == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "mask":
        mask = np.ones(shape, dtype=np.int64)
        mask[..., shape[-1] - shape[-1] // 8 :] = 0
        return mask
    _, vocab = kind
    return rng.integers(0, vocab, shape, dtype=np.int64)


def calibrate_batchnorms(net, specs, rng):
    norms = [x for x in net.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None
    batch = [torch.from_numpy(make_input((4,) + tuple(shape[1:]), kind, rng)) for _, shape, kind in specs]
    net.train()
    with torch.no_grad():
        net(*batch)


def make(name, out_dir, dynamic_axes=None):
    """Exports CATALOGUE[name] into out_dir/name; `dynamic_axes` (torch.onnx's) leaves the named dims open."""
    factory, specs = CATALOGUE[name]
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = factory()
    calibrate_batchnorms(net, specs, rng)
    net.eval()
    inputs = [make_input(shape, kind, rng) for _, shape, kind in specs]
    folder = out_dir / name
    (folder / "test_data_set_0").mkdir(parents=True, exist_ok=True)
    model_path = folder / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(
            net,
            tuple(torch.from_numpy(x) for x in inputs),
            str(model_path),
            input_names=[n for n, _, _ in specs],
            dynamic_axes=dynamic_axes,
            opset_version=17,
            dynamo=False,
        )
    onnx.checker.check_model(str(model_path), full_check=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    outputs = session.run(None, feeds)
    for k, (port, x) in enumerate(zip(session.get_inputs(), inputs)):
        (folder / f"test_data_set_0/input_{k}.pb").write_bytes(numpy_helper.from_array(x, port.name).SerializeToString())
    for k, (port, y) in enumerate(zip(session.get_outputs(), outputs)):
        (folder / f"test_data_set_0/output_{k}.pb").write_bytes(numpy_helper.from_array(y, port.name).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CATALOGUE)
    for name in names:
        if name not in CATALOGUE:
            sys.exit(f"no model named {name}; the suite has: {', '.join(CATALOGUE)}")
        if (args.out_dir / name / "test_data_set_0/output_0.pb").exists():
            continue
        print(f"making {name}", flush=True)
        make(name, args.out_dir)


if __name__ == "__main__":
    main()
