"""Writes a handful of the fp32 suite's models exported with dynamic axes.

    python make_dynamic.py OUT_DIR [--only NAME,...]

The architectures, seeds and inputs are make_suite.py's; the export names
the dims the model allows to vary (batch, sequence, steps, height, width)
through torch.onnx's `dynamic_axes`, so that the graph computes its shapes
from them (Shape → Gather → Unsqueeze → Concat → Reshape, as exporters
emit). `onnxc info OUT_DIR/<name>/model.onnx` then prints the outputs'
shapes as expressions of those dims. Writes OUT_DIR/<name>/model.onnx and
test_data_set_0 at the suite's sizes, as make_suite.py does. Existing
folders are kept (delete one to remake it).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_suite as suite  # noqa: E402

# name in make_suite.CATALOGUE -> {input name: {axis: dim name}}
DYNAMIC = {
    "bert_small_seq128": {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
    "gpt_small_seq64": {"input_ids": {0: "batch", 1: "seq"}},
    "vit_tiny_224": {"image": {0: "batch"}},
    "whisper_tiny_encoder_10s": {"mel": {0: "batch"}},
    "lstm_64_t10": {"x": {0: "steps", 1: "batch"}},
    "gru_64_t10": {"x": {0: "steps", 1: "batch"}},
    "bilstm_256_t100": {"x": {0: "steps", 1: "batch"}},
    "resnet18": {"image": {0: "batch", 2: "height", 3: "width"}},
    "mobilenet_v3_small": {"image": {0: "batch", 2: "height", 3: "width"}},
    "yolo_n_320": {"image": {0: "batch", 2: "height", 3: "width"}},
    "crnn_32x320": {"image": {0: "batch", 3: "width"}},
    "m5_16k": {"wave": {0: "batch", 2: "samples"}},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(DYNAMIC)
    for name in names:
        if name not in DYNAMIC:
            sys.exit(f"no model named {name}; the dynamic suite has: {', '.join(DYNAMIC)}")
        if (args.out_dir / name / "test_data_set_0/output_0.pb").exists():
            continue
        print(f"making {name}", flush=True)
        suite.make(name, args.out_dir, DYNAMIC[name])


if __name__ == "__main__":
    main()
