"""The architectures of the broad benchmark suite, as PyTorch modules.

Each is written here at the size its family is deployed at (or taken from
torchvision without weights); make_bench_suite.py seeds, calibrates and
exports them. The shapes follow the models they stand for: BERT-small and
BERT-base encoders with a padding mask, GPT-2-like decoders with a causal
mask and a tied head, ViT-tiny and DeiT-small, a Whisper-tiny-like audio
encoder, a YOLOv8n-like detector, a DBNet-like text detector, a CRNN text
recogniser, style-transfer and GAN generators, 1-D audio nets, and RNNs.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F


# --- transformers -----------------------------------------------------------


class Attention(nn.Module):
    """Multi-head attention with an additive bias (padding or causal mask)."""

    def __init__(self, d, heads, fused_qkv):
        super().__init__()
        self.heads = heads
        self.fused_qkv = fused_qkv
        if fused_qkv:
            self.qkv = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x, bias):
        b, t, d = x.shape
        if self.fused_qkv:
            q, k, v = self.qkv(x).split(d, dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        split = lambda y: y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        if bias is not None:
            scores = scores + bias
        y = scores.softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """A transformer layer: post-norm (BERT) or pre-norm (GPT-2, ViT, Whisper)."""

    def __init__(self, d, heads, gelu="none", pre_norm=True, fused_qkv=True):
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = Attention(d, heads, fused_qkv)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate=gelu), nn.Linear(4 * d, d))

    def forward(self, x, bias=None):
        if self.pre_norm:
            x = x + self.attn(self.norm1(x), bias)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, bias))
        return self.norm2(x + self.mlp(x))


class Bert(nn.Module):
    """BERT-like encoder: token + position embeddings, post-norm layers, erf GELU."""

    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.norm = nn.LayerNorm(d)
        self.layers = nn.ModuleList(Block(d, heads, pre_norm=False, fused_qkv=False) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        t = input_ids.shape[1]
        x = self.norm(self.tokens(input_ids) + self.positions.weight[:t])
        bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


class Gpt(nn.Module):
    """GPT-2-like decoder: causal mask, tanh GELU, head tied to the embedding."""

    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.layers = nn.ModuleList(Block(d, heads, gelu="tanh") for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, input_ids):
        t = input_ids.shape[1]
        x = self.tokens(input_ids) + self.positions.weight[:t]
        bias = torch.zeros(t, t).masked_fill(~self.causal[:t, :t], torch.finfo(torch.float32).min)
        for layer in self.layers:
            x = layer(x, bias)
        return self.norm(x) @ self.tokens.weight.t()


class Vit(nn.Module):
    """ViT/DeiT: 16×16 patches, class token, pre-norm layers."""

    def __init__(self, d, layers, heads, image=224, patch=16, classes=1000):
        super().__init__()
        self.patches = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.positions = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        self.layers = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, image):
        x = self.patches(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.positions
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x[:, 0]))


class WhisperEncoder(nn.Module):
    """Whisper-tiny-like audio encoder: two Conv1d + GELU, sinusoids, pre-norm layers."""

    def __init__(self, mels=80, d=384, layers=4, heads=6, frames=1000):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        t = frames // 2
        scale = torch.exp(-math.log(10000) * torch.arange(d // 2) / (d // 2 - 1))
        angles = torch.arange(t)[:, None] * scale[None, :]
        self.register_buffer("positions", torch.cat([angles.sin(), angles.cos()], dim=1))
        self.layers = nn.ModuleList(Block(d, heads, fused_qkv=False) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, mel):
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2) + self.positions
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


# --- recurrent nets ---------------------------------------------------------


class Recurrent(nn.Module):
    """An LSTM or GRU over [T, 1, features] and a linear head on every step."""

    def __init__(self, cell, features, hidden, layers, bidirectional):
        super().__init__()
        kind = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = kind(features, hidden, num_layers=layers, bidirectional=bidirectional)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), 32)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


class Crnn(nn.Module):
    """CRNN text recogniser: a VGG-style conv stack, two BiLSTMs, a CTC head."""

    def __init__(self, classes=97):
        super().__init__()
        layers, c = [], 1
        for out, pool in [(64, (2, 2)), (128, (2, 2)), (256, None), (256, (2, 1)), (512, None), (512, (2, 1))]:
            layers += [nn.Conv2d(c, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU()]
            if pool:
                layers.append(nn.MaxPool2d(pool, pool))
            c = out
        layers += [nn.Conv2d(512, 512, (2, 1)), nn.BatchNorm2d(512), nn.ReLU()]
        self.cnn = nn.Sequential(*layers)
        self.rnn1 = nn.LSTM(512, 256, bidirectional=True)
        self.rnn2 = nn.LSTM(512, 256, bidirectional=True)
        self.head = nn.Linear(512, classes)

    def forward(self, image):
        x = self.cnn(image).squeeze(2).permute(2, 0, 1)
        return self.head(self.rnn2(self.rnn1(x)[0])[0]).log_softmax(-1)


# --- detectors and segmentation ----------------------------------------------


def conv_bn_silu(c_in, c_out, k=3, s=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, k, s, k // 2, bias=False), nn.BatchNorm2d(c_out), nn.SiLU())


class C2f(nn.Module):
    """YOLOv8's C2f: split in two, a chain of bottlenecks, concatenate all."""

    def __init__(self, c_in, c_out, n, shortcut):
        super().__init__()
        self.hidden = c_out // 2
        self.cv1 = conv_bn_silu(c_in, 2 * self.hidden, 1)
        self.cv2 = conv_bn_silu((2 + n) * self.hidden, c_out, 1)
        self.blocks = nn.ModuleList(
            nn.Sequential(conv_bn_silu(self.hidden, self.hidden), conv_bn_silu(self.hidden, self.hidden)) for _ in range(n)
        )
        self.shortcut = shortcut

    def forward(self, x):
        parts = list(self.cv1(x).split(self.hidden, dim=1))
        for block in self.blocks:
            y = block(parts[-1])
            parts.append(parts[-1] + y if self.shortcut else y)
        return self.cv2(torch.cat(parts, dim=1))


class Sppf(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cv1, self.cv2 = conv_bn_silu(c, c // 2, 1), conv_bn_silu(c * 2, c, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        a = self.pool(x)
        b = self.pool(a)
        return self.cv2(torch.cat([x, a, b, self.pool(b)], dim=1))


class Yolo(nn.Module):
    """YOLOv8n-like detector: C2f backbone, SPPF, nearest-upsample PAN neck, three heads."""

    def __init__(self, classes=80):
        super().__init__()
        w = [16, 32, 64, 128, 256]
        self.stem = nn.Sequential(conv_bn_silu(3, w[0], 3, 2), conv_bn_silu(w[0], w[1], 3, 2), C2f(w[1], w[1], 1, True))
        self.p3 = nn.Sequential(conv_bn_silu(w[1], w[2], 3, 2), C2f(w[2], w[2], 2, True))
        self.p4 = nn.Sequential(conv_bn_silu(w[2], w[3], 3, 2), C2f(w[3], w[3], 2, True))
        self.p5 = nn.Sequential(conv_bn_silu(w[3], w[4], 3, 2), C2f(w[4], w[4], 1, True), Sppf(w[4]))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.top4, self.top3 = C2f(w[4] + w[3], w[3], 1, False), C2f(w[3] + w[2], w[2], 1, False)
        self.down3, self.bottom4 = conv_bn_silu(w[2], w[2], 3, 2), C2f(w[2] + w[3], w[3], 1, False)
        self.down4, self.bottom5 = conv_bn_silu(w[3], w[3], 3, 2), C2f(w[3] + w[4], w[4], 1, False)
        self.heads = nn.ModuleList(
            nn.Sequential(conv_bn_silu(c, 64), conv_bn_silu(64, 64), nn.Conv2d(64, 64 + classes, 1)) for c in w[2:]
        )

    def forward(self, image):
        p3 = self.p3(self.stem(image))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        t4 = self.top4(torch.cat([self.up(p5), p4], 1))
        t3 = self.top3(torch.cat([self.up(t4), p3], 1))
        b4 = self.bottom4(torch.cat([self.down3(t3), t4], 1))
        b5 = self.bottom5(torch.cat([self.down4(b4), p5], 1))
        outs = [head(x).flatten(2) for head, x in zip(self.heads, [t3, b4, b5])]
        boxes, scores = torch.cat(outs, 2).split([64, outs[0].shape[1] - 64], dim=1)
        return boxes, scores.sigmoid()


class TorchvisionSegmentation(nn.Module):
    """A torchvision segmentation model's "out" map."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        return self.model(image)["out"]


class DbNet(nn.Module):
    """DBNet-like text detector: ResNet-18 features, FPN with upsampling, ConvTranspose head."""

    def __init__(self, resnet):
        super().__init__()
        self.stem = nn.Sequential(resnet.conv1, resnet.bn1, resnet.relu, resnet.maxpool)
        self.stages = nn.ModuleList([resnet.layer1, resnet.layer2, resnet.layer3, resnet.layer4])
        self.lateral = nn.ModuleList(nn.Conv2d(c, 256, 1, bias=False) for c in [64, 128, 256, 512])
        self.smooth = nn.ModuleList(nn.Conv2d(256, 64, 3, padding=1, bias=False) for _ in range(4))
        self.head = nn.Sequential(
            nn.Conv2d(256, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 64, 2, 2), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 1, 2, 2), nn.Sigmoid(),
        )

    def forward(self, image):
        x, features = self.stem(image), []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        maps = [lateral(f) for lateral, f in zip(self.lateral, features)]
        for i in range(3, 0, -1):
            maps[i - 1] = maps[i - 1] + F.interpolate(maps[i], scale_factor=2.0, mode="nearest")
        size = maps[0].shape[2:]
        parts = [F.interpolate(s(m), size=size, mode="bilinear", align_corners=False) for s, m in zip(self.smooth, maps)]
        return self.head(torch.cat(parts, 1))


# --- generators ---------------------------------------------------------------


def reflect_conv_in(c_in, c_out, k, s=1, relu=True):
    layers = [nn.ReflectionPad2d(k // 2), nn.Conv2d(c_in, c_out, k, s), nn.InstanceNorm2d(c_out, affine=True)]
    return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(reflect_conv_in(c, c, 3), reflect_conv_in(c, c, 3, relu=False))

    def forward(self, x):
        return x + self.body(x)


class StyleTransfer(nn.Module):
    """Fast style transfer (Johnson et al.): reflect pads, InstanceNorm, residual
    blocks, and upsampling by nearest Resize ("resize") or ConvTranspose."""

    def __init__(self, upsample):
        super().__init__()
        self.down = nn.Sequential(reflect_conv_in(3, 32, 9), reflect_conv_in(32, 64, 3, 2), reflect_conv_in(64, 128, 3, 2))
        self.blocks = nn.Sequential(*[Residual(128) for _ in range(5)])
        if upsample == "resize":
            up = lambda c_in, c_out: [nn.Upsample(scale_factor=2, mode="nearest"), reflect_conv_in(c_in, c_out, 3)]
        else:
            up = lambda c_in, c_out: [
                nn.ConvTranspose2d(c_in, c_out, 3, 2, padding=1, output_padding=1),
                nn.InstanceNorm2d(c_out, affine=True), nn.ReLU(),
            ]
        self.up = nn.Sequential(*up(128, 64), *up(64, 32), nn.ReflectionPad2d(4), nn.Conv2d(32, 3, 9))

    def forward(self, image):
        return torch.tanh(self.up(self.blocks(self.down(image))))


class Dcgan(nn.Module):
    """DCGAN generator: ConvTranspose + BatchNorm + ReLU from a latent to 64×64."""

    def __init__(self, z=100, w=64):
        super().__init__()
        chans = [z, w * 8, w * 4, w * 2, w]
        layers = []
        for i, (c_in, c_out) in enumerate(zip(chans, chans[1:])):
            layers += [nn.ConvTranspose2d(c_in, c_out, 4, 1 if i == 0 else 2, 0 if i == 0 else 1, bias=False)]
            layers += [nn.BatchNorm2d(c_out), nn.ReLU()]
        self.body = nn.Sequential(*layers, nn.ConvTranspose2d(w, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.body(z)


# --- 1-D audio nets -------------------------------------------------------------


class M5(nn.Module):
    """M5 raw-waveform classifier: a wide strided Conv1d, then 3-tap convs and pools."""

    def __init__(self, classes=35):
        super().__init__()
        layers, c = [nn.Conv1d(1, 128, 80, stride=4), nn.BatchNorm1d(128), nn.ReLU(), nn.MaxPool1d(4)], 128
        for out in [128, 256, 512]:
            layers += [nn.Conv1d(c, out, 3, padding=1), nn.BatchNorm1d(out), nn.ReLU(), nn.MaxPool1d(4)]
            c = out
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(512, classes)

    def forward(self, wave):
        return self.head(self.body(wave).mean(-1))


class KeywordSpotter(nn.Module):
    """A depthwise-separable Conv1d keyword spotter over MFCC frames (k = 9)."""

    def __init__(self, mfcc=40, w=128, classes=12):
        super().__init__()
        layers = [nn.Conv1d(mfcc, w, 3, padding=1), nn.BatchNorm1d(w), nn.ReLU()]
        for _ in range(6):
            layers += [nn.Conv1d(w, w, 9, padding=4, groups=w), nn.BatchNorm1d(w), nn.ReLU()]
            layers += [nn.Conv1d(w, w, 1), nn.BatchNorm1d(w), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(w, classes)

    def forward(self, mfcc):
        return self.head(self.body(mfcc).mean(-1))


# --- depthwise-heavy CNNs ----------------------------------------------------------


class InvertedResidual(nn.Module):
    def __init__(self, c_in, c_out, k, s, expand):
        super().__init__()
        hidden = c_in * expand
        self.body = nn.Sequential(
            nn.Conv2d(c_in, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, k, s, k // 2, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, c_out, 1, bias=False), nn.BatchNorm2d(c_out),
        )
        self.residual = s == 1 and c_in == c_out

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetK7(nn.Module):
    """A MobileNet-V2-shaped net whose depthwise convolutions are all 7×7."""

    def __init__(self, classes=1000):
        super().__init__()
        layers, c = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()], 32
        for out, n, s in [(24, 2, 2), (40, 3, 2), (80, 3, 2), (112, 2, 1), (192, 3, 2)]:
            for i in range(n):
                layers.append(InvertedResidual(c, out, 7, s if i == 0 else 1, 1 if c == 32 else 6))
                c = out
        self.body = nn.Sequential(*layers, nn.Conv2d(c, 1280, 1), nn.ReLU6())
        self.head = nn.Linear(1280, classes)

    def forward(self, image):
        return self.head(self.body(image).mean((2, 3)))
