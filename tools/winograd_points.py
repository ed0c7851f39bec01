#!/usr/bin/env python3
"""winograd_points.py — how far the weight gradient of a 3 x 3 convolution by Winograd's
algorithm lands from PyTorch's, in float32, for several sets of interpolation points: the
worst element's error as a multiple of test_k3p1_pytorch's first tolerance (1e-5 + 1e-4 |x|)
and of the one it takes now (1e-5 of the tensor's largest value + 1e-4 |x|, as
test_model_random's), on that fixture's data (tests/fixtures/conv_stride_padding.safetensors,
case k3p1).

The weight gradient G^T (sum over tiles of (A dY A^T) * (B^T d B)) G is computed with numpy,
every product rounded to float32 (the order of the sums is numpy's, not cnnc's kernels'; the
size of the error is what matters); the matrices come from Toom-Cook's construction for any
points (the last one at infinity), and the same code in double agrees with the exact gradient,
which checks the construction. It measures; it does not test cnnc (docs/speed.md, "A max-pool
inside BatchNorm's passes", tried and dropped). Usage: python3 tools/winograd_points.py
"""
import json
import os
import struct
from fractions import Fraction as F

import numpy as np

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures",
                       "conv_stride_padding.safetensors")


def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header, base = json.loads(data[8:8 + n]), 8 + n
    out = {}
    for k, v in header.items():
        if k != "__metadata__":
            s, e = v["data_offsets"]
            out[k] = np.frombuffer(data[base + s:base + e], dtype=np.float32).reshape(v["shape"])
    return out


def matrices(points, m, r):
    """A^T [m, a], G [a, r], B^T [a, a] of F(m, r) on the finite points and infinity."""
    a = len(points) + 1
    at = [[p ** i for p in points] + [1 if i == m - 1 else 0] for i in range(m)]
    g = []
    for j, p in enumerate(points):
        f = F(1)
        for k, q in enumerate(points):
            if k != j:
                f *= p - q
        g.append([p ** k / f for k in range(r)])
    g.append([1 if k == r - 1 else 0 for k in range(r)])
    rows, rhs = [], []  # sum_j A^T[i][j] G[j][k] B^T[j][l] = [l == i + k]
    for i in range(m):
        for k in range(r):
            for l in range(a):
                row = np.zeros(a * a)
                for j in range(a):
                    row[j * a + l] = float(at[i][j] * g[j][k])
                rows.append(row)
                rhs.append(1.0 if l == i + k else 0.0)
    bt = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0].reshape(a, a)
    return (np.array(at, dtype=float), np.array([[float(v) for v in row] for row in g]), bt)


def weight_gradient(x, dy, points, m, dtype):
    at, g, bt = (t.astype(dtype) for t in matrices(points, m, 3))
    a = at.shape[1]
    B, C, H, W = x.shape
    OC = dy.shape[1]
    ty, tx = (H + m - 1) // m, (W + m - 1) // m
    xp = np.zeros((B, C, ty * m + 2, tx * m + 2), np.float32)
    xp[:, :, 1:H + 1, 1:W + 1] = x
    dp = np.zeros((B, OC, ty * m, tx * m), np.float32)
    dp[:, :, :H, :W] = dy
    acc = np.zeros((a, a, OC, C), dtype)
    for b in range(B):
        for i in range(ty):
            for j in range(tx):
                d = xp[b, :, i * m:i * m + a, j * m:j * m + a].astype(dtype)
                v = np.einsum("uv,cvw,xw->cux", bt, d, bt).astype(dtype)
                t = dp[b, :, i * m:i * m + m, j * m:j * m + m].astype(dtype)
                mm = np.einsum("uv,ouw,wx->ovx", at, t, at).astype(dtype)
                acc += np.einsum("ouv,cuv->uvoc", mm, v).astype(dtype)
    return np.einsum("ju,uvoc,vk->ocjk", g.T, acc, g).astype(np.float64)


def main():
    t = load(FIXTURE)
    x, dy = t["k3p1.x"], t["k3p1.dy"]
    want = t["k3p1.dweight"].astype(np.float64)
    H, W = x.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    exact = np.zeros(want.shape)
    for i in range(3):
        for j in range(3):
            exact[:, :, i, j] = np.einsum("bohw,bchw->oc", dy.astype(np.float64),
                                          xp[:, :, i:i + H, j:j + W])

    def violation(got, atol=1e-5):
        return np.max(np.abs(got - want) / (atol + 1e-4 * np.abs(want)))

    scaled = 1e-5 * np.max(np.abs(want))

    print("PyTorch's own result against the exact one: %.2f" % violation(exact))
    sets = [("F(2x2, 3x3), 0 +-1", [F(0), F(1), F(-1)], 2),
            ("F(3x3, 3x3), 0 +-1 -2", [F(0), F(1), F(-1), F(-2)], 3),
            ("F(4x4, 3x3), 0 +-1 +-2", [F(0), F(1), F(-1), F(2), F(-2)], 4),
            ("F(4x4, 3x3), 0 +-1 +-1/2", [F(0), F(1), F(-1), F(1, 2), F(-1, 2)], 4),
            ("F(4x4, 3x3), 0 +-1 +-3/2", [F(0), F(1), F(-1), F(3, 2), F(-3, 2)], 4),
            ("F(4x4, 3x3), 0 +-1 1/2 -2", [F(0), F(1), F(-1), F(1, 2), F(-2)], 4),
            ("F(4x4, 3x3), 0 +-1 2 -1/2", [F(0), F(1), F(-1), F(2), F(-1, 2)], 4)]
    for name, points, m in sets:
        got = weight_gradient(x, dy, points, m, np.float32)
        print("%-28s float32 %.2f (scaled %.2f)   double %.2f" % (
            name, violation(got), violation(got, scaled),
            violation(weight_gradient(x, dy, points, m, np.float64))))


if __name__ == "__main__":
    main()
