"""gen_fixtures.py — writes the PyTorch reference fixtures that cnnc's tests compare against.

Outputs (in tests/fixtures/ unless --out is given):
  layers.safetensors          every layer kernel's forward and backward (autograd) on small inputs
  layers_pool_dropout.safetensors
                              avgpool2d (overlapping windows too), global average pooling and
                              dropout in evaluation mode, forward and backward
  conv_stride_padding.safetensors
                              convolutions with stride, zero padding or no bias (forward and
                              backward)
  label_smoothing.safetensors log_softmax followed by CrossEntropyLoss(label_smoothing=0.1):
                              loss and gradient of the logits
  model_steps.safetensors     the seed's model: initial state, 3 data-parallel SGD steps, final
                              state
  model_steps_smooth.safetensors
                              the same with CrossEntropyLoss(label_smoothing=0.1)
  lr_schedule.safetensors     the learning rate of each step under StepLR, CosineAnnealingLR,
                              OneCycleLR and a constant rate, with and without a LinearLR warmup
  pytorch_model.safetensors   a model-only state_dict trained 1 epoch in PyTorch, with its test
                              accuracy in __metadata__ ("test_accuracy"); the data order is the
                              first one that leaves no test prediction near a tie
  random_models.safetensors   32 models drawn at random (their text in __metadata__ "model.K"),
                              each with parameters, a batch, and PyTorch's float64
                              log-probabilities (evaluation and training), gradient and
                              BatchNorm batch statistics, dropout with cnnc's own masks
                              (--random-models N --random-seed S draw others; --soak sets aside
                              those float32 cannot be held to: `make soak`)

Run with Debian's interpreter (python3-torch 1.13):  /usr/bin/python3 tools/gen_fixtures.py
(--only NAME writes that one output, e.g. --only layers_pool_dropout).
Deterministic: fixed seeds, one thread. Uses Fashion-MNIST from
/usr/share/datasets/fashion-mnist when present (random pixels otherwise; pytorch_model needs it).

Deliberately not here: any use of the safetensors package (the writer is tools/cnnc_torch.py's,
so the script needs nothing beyond torch and numpy), any dtype other than F32/I64 (cnnc reads
only those), and any C-side logic: the tests decide what to compare and how tightly.
"""
import argparse
import collections
import copy
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import cnnc_torch  # tools/, beside this script

DATA_DIR = '/usr/share/datasets/fashion-mnist'
MEAN, STD = 0.1307, 0.3081


# ---------------------------------------------------------------- safetensors writer

def write_safetensors(path, tensors, meta):
    """tensors: list of (name, array); arrays become F32 or I64, little-endian, in list order
    (tools/cnnc_torch.py's writer)."""
    size = cnnc_torch.write_safetensors(path, tensors, meta)
    print(f'{path}: {len(tensors)} tensors, {size} bytes')


def f32(t):
    """A copy (state_dict tensors keep changing while the script runs)."""
    return np.array(t.detach().cpu().numpy(), dtype=np.float32, copy=True)


def i64(t):
    return np.array(t.detach().cpu().numpy() if torch.is_tensor(t) else t, dtype=np.int64,
                    copy=True)


# ---------------------------------------------------------------- data

def load_split(split, data_dir):
    """Raw uint8 images [N,28,28] and int64 labels [N], or None when the files are absent."""
    img = os.path.join(data_dir, f'{split}-images-idx3-ubyte.gz')
    lab = os.path.join(data_dir, f'{split}-labels-idx1-ubyte.gz')
    if not (os.path.exists(img) and os.path.exists(lab)):
        return None
    return cnnc_torch.read_idx(img), cnnc_torch.read_idx(lab).astype(np.int64)


def normalize(pixels):
    """((x/255) - 0.1307) / 0.3081, every operation in float32, as a [N,1,28,28] tensor."""
    x = pixels.astype(np.float32) / np.float32(255)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    return torch.from_numpy(x.astype(np.float32)).unsqueeze(1)


# ---------------------------------------------------------------- layers.safetensors

def leaf(t):
    return t.detach().clone().requires_grad_(True)


def case_conv(prefix, B, C, H, OC, K, seed, W=None, stride=1, pad=0, bias=True):
    torch.manual_seed(seed)
    conv = nn.Conv2d(C, OC, K, stride=stride, padding=pad, bias=bias)
    x = leaf(torch.randn(B, C, H, W or H))
    y = conv(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('weight', conv.weight), ('y', y), ('dy', dy), ('dx', x.grad),
           ('dweight', conv.weight.grad)]
    if bias:
        out[2:2] = [('bias', conv.bias)]
        out.append(('dbias', conv.bias.grad))
    meta = {'B': B, 'C': C, 'H': H, 'W': W or H, 'OC': OC, 'K': K}
    return named(prefix, out), prefixed(prefix, meta)


def case_conv_sp(prefix, B, C, H, W, OC, K, stride, pad, bias, seed):
    """A convolution with stride, padding and bias (1) or none (0) in its metadata."""
    t, m = case_conv(prefix, B, C, H, OC, K, seed, W=W, stride=stride, pad=pad, bias=bias)
    m.update(prefixed(prefix, {'stride': stride, 'pad': pad, 'bias': int(bias)}))
    return t, m


def tie_windows(x, S):
    """Plants exact ties inside pooling windows, cycling through four patterns: all four equal,
    a tie of (0,1) with (1,0), a tie of (1,0) with (1,1), untouched. Cells outside the floored
    windows get a large value so that reading them would change the result."""
    B, C, H, W = x.shape
    OH, OW = H // S, W // S
    x[:, :, OH * S:, :] = 10.0
    x[:, :, :, OW * S:] = 10.0
    k = 0
    for b in range(B):
        for c in range(C):
            for oy in range(OH):
                for ox in range(OW):
                    w = x[b, c, oy * S:oy * S + S, ox * S:ox * S + S]
                    top = float(w.max()) + 0.5
                    if k % 4 == 0:
                        w.fill_(top)
                    elif k % 4 == 1:
                        w[0, 1] = top
                        w[1, 0] = top
                    elif k % 4 == 2:
                        w[1, 0] = top
                        w[1, 1] = top
                    k += 1
    return x


def case_pool(prefix, B, C, H, S, seed):
    torch.manual_seed(seed)
    x = leaf(tie_windows(torch.randn(B, C, H, H), S))
    y, idx = F.max_pool2d(x, S, return_indices=True)
    dy = torch.randn_like(y)
    y.backward(dy)
    check_first_max(x.detach(), idx, S)
    out = [('x', x), ('y', y), ('dy', dy), ('dx', x.grad), ('argmax', idx)]
    return named(prefix, out), prefixed(prefix, {'B': B, 'C': C, 'H': H, 'W': H, 'S': S})


def check_first_max(x, idx, S):
    """Asserts that PyTorch's indices are the first maximum in scan order of each window."""
    B, C, H, W = x.shape
    for b in range(B):
        for c in range(C):
            for oy in range(H // S):
                for ox in range(W // S):
                    best, at = None, None
                    for dy in range(S):
                        for dx in range(S):
                            yy, xx = oy * S + dy, ox * S + dx
                            v = float(x[b, c, yy, xx])
                            if best is None or v > best:
                                best, at = v, yy * W + xx
                    assert int(idx[b, c, oy, ox]) == at, 'PyTorch did not keep the first max'


def case_relu(seed):
    torch.manual_seed(seed)
    x = torch.randn(3, 20)
    x.view(-1)[::10] = 0.0
    x = leaf(x)
    y = F.relu(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    return named('relu', [('x', x), ('y', y), ('dy', dy), ('dx', x.grad)]), {}


def case_bn_train(seed):
    torch.manual_seed(seed)
    B, C, H = 4, 3, 5
    bn = nn.BatchNorm2d(C)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(C) * 0.5 + 1.0)
        bn.bias.copy_(torch.randn(C) * 0.5)
    x = leaf(torch.randn(B, C, H, H) * torch.tensor([1.0, 2.5, 0.3]).view(1, C, 1, 1)
             + torch.tensor([0.0, -1.0, 3.0]).view(1, C, 1, 1))
    bn.train()
    y = bn(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    xd = x.detach().double()
    mean = xd.mean(dim=(0, 2, 3))
    var_b = xd.var(dim=(0, 2, 3), unbiased=False)
    out = [('x', x), ('weight', bn.weight), ('bias', bn.bias), ('y', y), ('dy', dy),
           ('dx', x.grad), ('dweight', bn.weight.grad), ('dbias', bn.bias.grad),
           ('mean', mean.float()), ('var_unbiased', xd.var(dim=(0, 2, 3), unbiased=True).float()),
           ('invstd', (1.0 / torch.sqrt(var_b + bn.eps)).float()),
           ('running_mean', bn.running_mean), ('running_var', bn.running_var)]
    meta = {'B': B, 'C': C, 'HW': H * H, 'eps': bn.eps, 'momentum': bn.momentum,
            'running_init': 'mean 0, var 1'}
    return named('bn', out), prefixed('bn', meta)


def case_bn_eval(seed):
    torch.manual_seed(seed)
    B, C, H = 4, 3, 5
    bn = nn.BatchNorm2d(C)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(C) * 0.5 + 1.0)
        bn.bias.copy_(torch.randn(C) * 0.5)
        bn.running_mean.copy_(torch.randn(C))
        bn.running_var.copy_(torch.rand(C) * 2 + 0.1)
    bn.eval()
    x = torch.randn(B, C, H, H) * 2
    with torch.no_grad():
        y = bn(x)
    out = [('x', x), ('weight', bn.weight), ('bias', bn.bias), ('running_mean', bn.running_mean),
           ('running_var', bn.running_var), ('y', y)]
    return named('bn_eval', out), prefixed('bn_eval', {'B': B, 'C': C, 'HW': H * H, 'eps': bn.eps})


def case_linear(seed):
    torch.manual_seed(seed)
    B, I, O = 3, 7, 5
    lin = nn.Linear(I, O)
    x = leaf(torch.randn(B, I))
    y = lin(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('weight', lin.weight), ('bias', lin.bias), ('y', y), ('dy', dy),
           ('dx', x.grad), ('dweight', lin.weight.grad), ('dbias', lin.bias.grad)]
    return named('linear', out), prefixed('linear', {'B': B, 'I': I, 'O': O})


def case_log_softmax(seed):
    torch.manual_seed(seed)
    x = leaf(torch.randn(4, 10) * 3)
    y = F.log_softmax(x, dim=1)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('y', y), ('dy', dy), ('dx', x.grad)]
    return named('logsoftmax', out), prefixed('logsoftmax', {'B': 4, 'N': 10})


def case_nll(seed):
    torch.manual_seed(seed)
    logp = leaf(F.log_softmax(torch.randn(4, 10) * 2, dim=1))
    labels = torch.tensor([3, 0, 9, 3])
    loss = F.nll_loss(logp, labels)
    loss.backward()
    out = [('logp', logp), ('labels', labels), ('loss', loss.reshape(1)), ('dlogp', logp.grad)]
    return named('nll', out), prefixed('nll', {'B': 4, 'N': 10, 'reduction': 'mean'})


def case_smoothing(seed, a):
    """CrossEntropyLoss(label_smoothing=a) on log-probabilities (log_softmax leaves them as
    they are), mean over the batch; labels repeat and leave classes out. Its own log_softmax
    projects the gradient of logp, not that of the logits x."""
    torch.manual_seed(seed)
    x = leaf(torch.randn(5, 10) * 2)
    logp = F.log_softmax(x, dim=1)
    labels = torch.tensor([3, 0, 9, 3, 7])
    loss = nn.CrossEntropyLoss(label_smoothing=a)(logp, labels)
    loss.backward()
    out = [('x', x), ('logp', logp), ('labels', labels), ('loss', loss.reshape(1)),
           ('dx', x.grad)]
    return named('smooth', out), prefixed('smooth', {'B': 5, 'N': 10, 'label_smoothing': a})


def named(prefix, items):
    res = []
    for name, t in items:
        arr = i64(t) if t.dtype == torch.int64 else f32(t)
        res.append((f'{prefix}.{name}', arr))
    return res


def prefixed(prefix, meta):
    return {f'{prefix}.{k}': v for k, v in meta.items()}


def gen_layers(path):
    cases = [lambda: case_conv('conv', 2, 3, 8, 4, 3, 1),
             lambda: case_conv('conv1', 2, 1, 12, 10, 5, 2),
             lambda: case_pool('pool', 2, 3, 6, 2, 3),
             lambda: case_pool('pool7', 2, 3, 7, 2, 4),
             lambda: case_relu(5), lambda: case_bn_train(6), lambda: case_bn_eval(7),
             lambda: case_linear(8), lambda: case_log_softmax(9), lambda: case_nll(10)]
    write_cases(path, cases)


def write_cases(path, cases):
    """Runs each case (a function returning its tensors and metadata) and writes them all."""
    tensors, meta = [], {}
    for case in cases:
        t, m = case()
        tensors += t
        meta.update(m)
    meta['generator'] = f'tools/gen_fixtures.py, torch {torch.__version__}'
    write_safetensors(path, tensors, meta)


# ---------------------------------------------------------------- layers_pool_dropout.safetensors

def case_avgpool(prefix, B, C, H, W, K, S, seed):
    torch.manual_seed(seed)
    x = leaf(torch.randn(B, C, H, W))
    y = F.avg_pool2d(x, K, S)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('y', y), ('dy', dy), ('dx', x.grad)]
    meta = {'B': B, 'C': C, 'H': H, 'W': W, 'K': K, 'S': S}
    return named(prefix, out), prefixed(prefix, meta)


def case_maxpool(prefix, B, C, H, W, K, S, seed):
    """nn.MaxPool2d(K, S) with windows that overlap (S < K) or leave gaps (S > K); values from
    a few levels so that ties occur, and PyTorch's argmax (index in the input plane)."""
    torch.manual_seed(seed)
    x = leaf(torch.randint(0, 4, (B, C, H, W)).float())
    y, argmax = F.max_pool2d(x, K, S, return_indices=True)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('y', y), ('argmax', argmax.long()), ('dy', dy), ('dx', x.grad)]
    meta = {'B': B, 'C': C, 'H': H, 'W': W, 'K': K, 'S': S}
    return named(prefix, out), prefixed(prefix, meta)


def case_global_avgpool(prefix, B, C, H, W, seed):
    """nn.AdaptiveAvgPool2d(1) then nn.Flatten(): y is [B, C]."""
    torch.manual_seed(seed)
    x = leaf(torch.randn(B, C, H, W) + 0.5)
    y = torch.flatten(nn.AdaptiveAvgPool2d(1)(x), 1)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('y', y), ('dy', dy), ('dx', x.grad)]
    return named(prefix, out), prefixed(prefix, {'B': B, 'C': C, 'H': H, 'W': W})


def case_dropout_eval(seed):
    torch.manual_seed(seed)
    drop = nn.Dropout(0.5)
    drop.eval()
    x = leaf(torch.randn(3, 4, 5, 5))
    y = drop(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = [('x', x), ('y', y), ('dy', dy), ('dx', x.grad)]
    return named('dropout_eval', out), prefixed('dropout_eval', {'B': 3, 'N': 100, 'p': 0.5})


def gen_layers_pool_dropout(path):
    cases = [lambda: case_avgpool('avgpool_k2s2', 2, 3, 7, 9, 2, 2, 21),
             lambda: case_avgpool('avgpool_k3s2', 2, 4, 9, 11, 3, 2, 22),
             lambda: case_avgpool('avgpool_k3s1', 2, 2, 6, 7, 3, 1, 23),
             lambda: case_avgpool('avgpool_k3s3', 3, 1, 10, 8, 3, 3, 24),
             lambda: case_global_avgpool('global_avgpool', 2, 5, 7, 6, 25),
             lambda: case_global_avgpool('global_avgpool_row', 3, 16, 1, 5, 26),
             lambda: case_dropout_eval(27),
             lambda: case_maxpool('maxpool_k3s2', 2, 3, 9, 11, 3, 2, 28),
             lambda: case_maxpool('maxpool_k2s1', 2, 2, 6, 7, 2, 1, 29),
             lambda: case_maxpool('maxpool_k2s3', 1, 3, 8, 10, 2, 3, 30)]
    write_cases(path, cases)


# ---------------------------------------------------------------- conv_stride_padding.safetensors

def gen_conv_stride_padding(path):
    cases = [('k3p1_small', 2, 3, 9, 9, 8, 3, 1, 1, True),
             ('k3p1', 2, 16, 8, 8, 32, 3, 1, 1, True),
             ('k3s2p1', 2, 4, 9, 11, 6, 3, 2, 1, True),
             ('k5s2p2', 2, 3, 11, 13, 5, 5, 2, 2, True),
             ('k1s2', 2, 6, 7, 8, 4, 1, 2, 0, True),
             ('k1', 2, 5, 6, 7, 3, 1, 1, 0, True),
             ('nobias_k3p1', 2, 5, 6, 6, 7, 3, 1, 1, False),
             ('nobias_k3', 2, 2, 6, 7, 3, 3, 1, 0, False)]
    write_cases(path, [lambda case=case, seed=seed: case_conv_sp(*case, seed)
                       for seed, case in enumerate(cases, start=20)])


# ---------------------------------------------------------------- the seed's model

class FashionMNIST(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.bn1 = nn.BatchNorm2d(10)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.bn2 = nn.BatchNorm2d(20)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = self.bn1(F.relu(F.max_pool2d(self.conv1(x), 2)))
        x = self.bn2(F.relu(F.max_pool2d(self.conv2(x), 2)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def bn_modules(m):
    return [mod for mod in m.modules() if isinstance(mod, nn.BatchNorm2d)]


def data_parallel_step(m, opt, x, y, R, smoothing=0.0):
    """One step with R replicas: own batch statistics each, averaged gradients and loss, and
    running statistics set to the mean of the replicas' updates from the same starting point.
    The loss: NLL, or CrossEntropyLoss(label_smoothing=smoothing) of the log-probabilities."""
    loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing) if smoothing else F.nll_loss
    bns = bn_modules(m)
    start = [(b.running_mean.clone(), b.running_var.clone(), b.num_batches_tracked.clone())
             for b in bns]
    B = x.shape[0] // R
    grads, losses, stats = None, [], []
    for r in range(R):
        for b, (rm, rv, nb) in zip(bns, start):
            b.running_mean.copy_(rm)
            b.running_var.copy_(rv)
            b.num_batches_tracked.copy_(nb)
        opt.zero_grad()
        loss = loss_fn(m(x[r * B:(r + 1) * B]), y[r * B:(r + 1) * B])
        loss.backward()
        losses.append(loss.detach())
        g = [p.grad.detach().clone() for p in m.parameters()]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        stats.append([(b.running_mean.clone(), b.running_var.clone()) for b in bns])
    with torch.no_grad():
        for p, g in zip(m.parameters(), grads):
            p.grad.copy_(g / R)
        for i, (b, (rm, rv, nb)) in enumerate(zip(bns, start)):
            b.running_mean.copy_(sum(s[i][0] for s in stats) / R)
            b.running_var.copy_(sum(s[i][1] for s in stats) / R)
            b.num_batches_tracked.copy_(nb + 1)
    opt.step()
    return float(sum(losses) / R)


def state_tensors(m, prefix):
    res = []
    for name, t in m.state_dict().items():
        arr = i64(t) if t.dtype == torch.int64 else f32(t)
        res.append((prefix + name, arr))
    return res


def gen_model_steps(path, train, smoothing=0.0):
    R, B, steps = 2, 16, 3
    torch.manual_seed(0)
    m = FashionMNIST()
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01 * R, momentum=0.5)
    n = steps * R * B
    if train is not None:
        pixels, labels, source = train[0][:n], train[1][:n], 'fashion-mnist train[0:96]'
    else:
        g = np.random.default_rng(0)
        pixels = g.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = g.integers(0, 10, size=n).astype(np.int64)
        source = 'random'
    tensors = state_tensors(m, 'init.')
    x, y = normalize(pixels), torch.from_numpy(labels)
    losses = []
    for s in range(steps):
        sl = slice(s * R * B, (s + 1) * R * B)
        losses.append(data_parallel_step(m, opt, x[sl], y[sl], R, smoothing))
    tensors += [('steps.images', pixels.reshape(steps, R * B, 28, 28).astype(np.float32)),
                ('steps.labels', labels.reshape(steps, R * B)),
                ('steps.loss', np.array(losses, dtype=np.float32))]
    tensors += state_tensors(m, 'final.')
    meta = {'replicas': R, 'batch_size': B, 'steps': steps, 'learning_rate': 0.01,
            'learning_rate_applied': 0.01 * R, 'momentum': 0.5, 'init_seed': 'torch.manual_seed(0)',
            'images': source, 'images_encoding': 'raw pixels 0..255 stored as F32',
            'generator': f'tools/gen_fixtures.py, torch {torch.__version__}'}
    if smoothing:
        meta['label_smoothing'] = smoothing
    write_safetensors(path, tensors, meta)


# ---------------------------------------------------------------- lr_schedule.safetensors

SCHEDULE_CASES = [  # kind, base, steps, warmup, step_size, gamma, total
    ('constant', 0.1, 8, 3, 1, 0.1, 8), ('step', 0.1, 12, 0, 4, 0.5, 12),
    ('step', 0.05, 12, 2, 3, 0.1, 12), ('cosine', 0.1, 10, 0, 1, 0.1, 10),
    ('cosine', 0.2, 12, 3, 1, 0.1, 12), ('onecycle', 0.1, 20, 0, 1, 0.1, 20),
    ('onecycle', 0.1, 23, 4, 1, 0.1, 23)]


def schedule_rates(kind, base, steps, warmup, step_size, gamma, total):
    """The rate of each of `steps` optimiser steps under torch.optim.lr_scheduler's StepLR,
    CosineAnnealingLR or OneCycleLR (defaults; constant: ConstantLR(factor=1)), after
    LinearLR(total_iters=warmup) in a SequentialLR when warmup > 0."""
    p = [torch.nn.Parameter(torch.zeros(1))]
    o = torch.optim.SGD(p, lr=base)
    lrs = torch.optim.lr_scheduler
    main = {'constant': lambda: lrs.ConstantLR(o, factor=1.0, total_iters=0),
            'step': lambda: lrs.StepLR(o, step_size=step_size, gamma=gamma),
            'cosine': lambda: lrs.CosineAnnealingLR(o, T_max=total - warmup),
            'onecycle': lambda: lrs.OneCycleLR(o, max_lr=base, total_steps=total - warmup)}[kind]()
    sched = main
    if warmup:
        sched = lrs.SequentialLR(o, [lrs.LinearLR(o, total_iters=warmup), main], [warmup])
    out = []
    for _ in range(steps):
        out.append(o.param_groups[0]['lr'])
        o.step()
        sched.step()
    return out


def gen_lr_schedule(path):
    tensors, meta = [], {}
    for i, (kind, base, steps, warmup, step_size, gamma, total) in enumerate(SCHEDULE_CASES):
        rates = schedule_rates(kind, base, steps, warmup, step_size, gamma, total)
        tensors.append((f'case{i}.lr', np.array(rates, dtype=np.float32)))
        meta.update(prefixed(f'case{i}', {'kind': kind, 'base': base, 'warmup': warmup,
                                          'step_size': step_size, 'gamma': gamma,
                                          'total': total}))
    meta['cases'] = len(SCHEDULE_CASES)
    meta['generator'] = f'tools/gen_fixtures.py, torch {torch.__version__}'
    write_safetensors(path, tensors, meta)


def evaluate(m, x, y):
    """Number of correct predictions and the smallest gap between the two largest
    log-probabilities of any sample (how far the argmax is from a rounding flip)."""
    m.eval()
    correct, gap = 0, float('inf')
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            out = m(x[i:i + 1000])
            correct += int((out.argmax(1) == y[i:i + 1000]).sum())
            top2 = out.topk(2, dim=1).values
            gap = min(gap, float((top2[:, 0] - top2[:, 1]).min()))
    return correct, gap


def train_one_epoch(x, y, order_seed, B):
    """The seed's model from torch.manual_seed(0), one epoch over x in the order of
    torch.randperm (generator seeded with order_seed), R=1, lr 0.01, momentum 0.5."""
    torch.manual_seed(0)
    m = FashionMNIST()
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.5)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(order_seed))
    for s in range(len(x) // B):
        idx = perm[s * B:(s + 1) * B]
        opt.zero_grad()
        F.nll_loss(m(x[idx]), y[idx]).backward()
        opt.step()
    return m


MIN_GAP = 1e-4  # no test prediction may be closer than this to a tie


def gen_pytorch_model(path, train, test):
    """Tries data orders 0, 1, ... until no test sample's top-2 log-probabilities are within
    MIN_GAP, so that an independent float32 implementation scores exactly the same accuracy."""
    if train is None or test is None:
        print(f'{path}: skipped (Fashion-MNIST not found in {DATA_DIR})')
        return
    n, B = 10000, 128
    x, y = normalize(train[0][:n]), torch.from_numpy(train[1][:n])
    xt, yt = normalize(test[0]), torch.from_numpy(test[1])
    for order_seed in range(50):
        m = train_one_epoch(x, y, order_seed, B)
        correct, gap = evaluate(m, xt, yt)
        if gap >= MIN_GAP:
            break
    else:
        raise SystemExit(f'{path}: every data order left a near tie in the test set')
    acc = 100.0 * correct / len(yt)
    meta = {'test_accuracy': f'{acc:.2f}', 'test_correct': correct, 'test_samples': len(yt),
            'test_min_top2_gap': f'{gap:.3g}',
            'training': f'1 epoch over the first {n} train images, order torch.randperm({n}) '
                        f'with a generator seeded {order_seed}, batch {B}, {n // B} steps '
                        '(last partial batch dropped), SGD lr 0.01 momentum 0.5, '
                        'init torch.manual_seed(0)',
            'generator': f'tools/gen_fixtures.py, torch {torch.__version__}'}
    write_safetensors(path, state_tensors(m, ''), meta)
    print(f'{path}: test_accuracy {acc:.2f}% ({correct}/{len(yt)}, data order {order_seed}, '
          f'smallest top-2 gap {gap:.3g})')


# ---------------------------------------------------------------- random_models.safetensors

RANDOM_NARROW, RANDOM_MODELS, RANDOM_BATCH = 24, 32, 6  # the models after the narrow are wide
# --soak: a relu's input or a max-pool's runner-up this close to the kink, as a fraction of the
# largest value of the input, may fall on the other side in float32 (4.5e-7 did, through
# Winograd's sums); and a gradient that PyTorch's own float32 misses by more than this fraction
# of the test's tolerance leaves too little room for cnnc's other roundings.
KINK_MARGIN, FLOAT32_LIMIT = 4e-6, 0.1
# --soak: the test's tolerances times this. Held to 1, five of six soaks of 400 drawn without
# the large models (seeds 8-13, 1,942 kept) passed on AVX-512, AVX2 and the portable kernels,
# the sixth stopped at 1.06 on the portable ones; with them, seed 1 of 2,000 passed and seed 2
# stopped at 1.11 with AVX-512 and AVX2. A bug shows as tens or more.
SOAK_TOLERANCE_SCALE = 2
DROPOUT_KEY = (7, 2, 5, 1)  # seed, epoch, step, replica of the step the test runs
GOLDEN, MASK64 = 0x9e3779b97f4a7c15, (1 << 64) - 1


def mix(z):
    """cnnc's src/mix.h: splitmix64's output function, of one value."""
    return int(mix_vector(np.array([z], dtype=np.uint64))[0])


def mix_in(h, v):
    return mix(((h + GOLDEN) & MASK64) ^ v)


def dropout_mask(shape, p, layer):
    """cnnc's dropout of layer number `layer` in the step DROPOUT_KEY names (dropout.c): each
    value kept (times 1/(1-p), computed in float) or zeroed by a hash of the step, the layer,
    the sample and the value's place, so that PyTorch computes with the very mask cnnc draws."""
    seed, epoch, step, replica = DROPOUT_KEY
    stream = mix((seed + GOLDEN) & MASK64)
    for v in (epoch, step, replica, layer):
        stream = mix_in(stream, v)
    drop = int(float(np.float32(p)) * 4294967296.0)
    scale = float(np.float32(1) / (np.float32(1) - np.float32(p)))
    n = int(np.prod(shape[1:]))
    mask = np.empty((shape[0], n))
    places = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN)  # wraps as mix's sums do
    for b in range(shape[0]):
        kept = mix_vector(np.uint64(mix_in(stream, b)) + places) >> np.uint64(32) >= drop
        mask[b] = np.where(kept, scale, 0.0)
    return torch.from_numpy(mask.reshape(shape))


def mix_vector(z):
    """splitmix64's output function of every element of a uint64 array (whose arithmetic wraps
    modulo 2^64, as src/mix.h's)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


class Masked(nn.Module):
    """A dropout with a given mask in training, nothing in evaluation."""

    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def forward(self, x):
        return x * self.mask if self.training else x


def draw_model(g, classes, wide, large=False):
    """A random model file's text: 1-3 blocks (a convolution of any kernel, stride and padding,
    then BatchNorm, a relu and a pool in one of the orders models use, maybe dropout) on 1-3
    channels of 5-16 x 5-16, then global average pooling or flatten, maybe a hidden linear
    layer (with BatchNorm1d, relu, dropout), and the classes. wide: 2-3 blocks of 8-16 channels
    on 10-24 x 10-24, mostly 3 x 3 convolutions of stride 1 (those of 8 channels or more in and
    out go through Winograd's algorithm), and global average pooling. large (with wide): 17-48
    channels on 16-34 x 16-34, so that the products span several tiles and vectors of channels
    and Winograd's blocks hold one sample or a few."""
    lo, hi = ((16, 35) if large else (10, 25)) if wide else (5, 17)
    c, h, w = int(g.integers(1, 4)), int(g.integers(lo, hi)), int(g.integers(lo, hi))
    out = [f'input channels={c} height={h} width={w} mean=0 std=1']

    def conv():
        nonlocal c, h, w
        small = min(h, w)
        k, p = int(g.integers(1, 6)), int(g.integers(0, 3))
        if wide and g.random() < 0.75:
            k = 3
        p = min(p, k // 2)
        k = min(k, small + 2 * p)
        p = min(p, k // 2)
        s = 2 if g.random() < (0.15 if wide else 0.25) else 1
        o = int(g.integers(17, 49) if large else g.integers(8, 17) if wide else g.integers(2, 9))
        out.append(f'conv2d out={o} kernel={k} stride={s} padding={p} bias={int(g.integers(0, 2))}')
        c, h, w = o, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1

    def pool():
        nonlocal h, w
        small = min(h, w)
        if small < 2:
            return
        k = 2 + (int(g.integers(0, 2)) if small >= 3 else 0)
        s = k if g.random() < 0.7 else int(g.integers(1, k + 1))
        out.append(f'{"maxpool2d" if g.random() < 0.7 else "avgpool2d"} kernel={k} stride={s}')
        h, w = (h - k) // s + 1, (w - k) // s + 1

    for _ in range(int(g.integers(2, 4) if wide else g.integers(1, 4))):
        conv()
        order = int(g.integers(0, 6))
        if order == 4:  # pool, relu, batchnorm: the seed's order
            pool()
            out += ['relu', 'batchnorm2d']
            continue
        out += [['batchnorm2d', 'relu'], ['relu', 'batchnorm2d'], ['relu'], ['batchnorm2d'], None,
                []][order]
        if g.random() < 0.6:
            pool()
        if g.random() < 0.2:
            out.append('dropout p=0.25')
    if g.random() < (0.9 if wide else 0.4):
        out.append('global_avgpool')
        if g.random() < 0.5:
            out.append('flatten')
    else:
        out.append('flatten')
    if g.random() < 0.6:
        out.append(f'linear out={int(g.integers(3, 11))} bias={int(g.integers(0, 2))}')
        if g.random() < 0.4:
            out.append('batchnorm1d')
        if g.random() < 0.7:
            out.append('relu')
        if g.random() < 0.3:
            out.append('dropout p=0.25')
    out += [f'linear out={classes}', 'log_softmax']
    return '\n'.join(out) + '\n'


def kink_hooks(seq, near):
    """Forward hooks that append to near each relu or max-pool whose input puts a value within
    KINK_MARGIN of its kink (a relu's input next to 0, a window's two largest values next to
    each other), as a fraction of the largest value of that input; exact zeros and exact ties
    are left out (every implementation computes them alike)."""
    def relu(mod, i, o, name):
        x = i[0].abs()
        nonzero = x[x > 0]
        if nonzero.numel() and nonzero.min() < KINK_MARGIN * x.max():
            near.append(f'relu {name}')

    def pool(mod, i, o, name):
        x, k, s = i[0], mod.kernel_size, mod.stride
        windows = F.unfold(x, k, stride=s).view(x.shape[0], x.shape[1], k * k, -1)
        top = windows.topk(2, dim=2).values
        gap = top[:, :, 0] - top[:, :, 1]
        gap = gap[gap > 0]
        if gap.numel() and gap.min() < KINK_MARGIN * x.abs().max():
            near.append(f'maxpool2d {name}')

    hooks = []
    for name, mod in seq.named_children():
        if isinstance(mod, nn.ReLU):
            hooks.append(mod.register_forward_hook(lambda m, i, o, n=name: relu(m, i, o, n)))
        if isinstance(mod, nn.MaxPool2d):
            hooks.append(mod.register_forward_hook(lambda m, i, o, n=name: pool(m, i, o, n)))
    return hooks


def float32_violation(seq, x, y, want):
    """How far PyTorch's own float32 gradient lands from its float64 one (want), in the
    measure of tests/test_model_random.c (1: at the edge of its tolerance)."""
    s = copy.deepcopy(seq).float()
    for mod in s.children():
        if isinstance(mod, Masked):
            mod.mask = mod.mask.float()
    s.zero_grad()
    F.nll_loss(s(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    got = torch.cat([p.grad.flatten() for p in s.parameters()]).double()
    tolerance = 1e-5 * want.abs().max() + 1e-4 * want.abs()
    return ((got - want).abs() / tolerance).max().item()


def random_model_case(k, g, wide, soak=False, large=False):
    """Model k: its text, parameters, a batch and what PyTorch computes from them in float64
    (log-probabilities in evaluation and in training, the gradient of the mean NLL, each
    BatchNorm's batch mean and unbiased variance). With soak, also why float32 cannot be held
    to it (a value next to a kink, or PyTorch's own float32 gradient too far off), or None."""
    classes = 3 + k % 3
    text = draw_model(g, classes, wide, large)
    lines = cnnc_torch.parse_model(text, f'random model {k}')
    torch.manual_seed(k)
    seq, _ = cnnc_torch.build(lines)
    seq = seq.double()
    with torch.no_grad():  # PyTorch's initialisation, moved off BatchNorm's 1 and 0 and zero biases
        for p in seq.parameters():
            p.add_(torch.from_numpy(0.1 * (2 * g.random(p.shape) - 1)))
    c, h, w = (lines[0][1][key] for key in ('channels', 'height', 'width'))
    x = (2 * g.random((RANDOM_BATCH, c, h, w)) - 1).astype(np.float32)
    y = g.integers(0, classes, RANDOM_BATCH)
    shapes, stats = {}, []
    hooks = [mod.register_forward_hook(lambda mod, i, o, name=name: shapes.__setitem__(name, i[0].shape))
             for name, mod in seq.named_children()]
    seq.eval()
    logp_eval = seq(torch.from_numpy(x).double())
    for hk in hooks:
        hk.remove()
    for name, mod in seq.named_children():
        if isinstance(mod, nn.Dropout) and mod.p > 0:
            setattr(seq, name, Masked(dropout_mask(shapes[name], mod.p, int(name))))
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            def keep(mod, i, o):
                dims = [0, 2, 3] if i[0].dim() == 4 else [0]
                stats.extend([i[0].mean(dims), i[0].var(dims, unbiased=True)])
            mod.register_forward_hook(keep)
    seq.train()
    near = []
    kinks = kink_hooks(seq, near) if soak else []
    logp = seq(torch.from_numpy(x).double())
    for hk in kinks:
        hk.remove()
    F.nll_loss(logp, torch.from_numpy(y)).backward()
    grad = torch.cat([p.grad.flatten() for p in seq.parameters()])
    params = torch.cat([p.detach().flatten() for p in seq.parameters()])
    report = torch.cat([t.detach() for t in stats]) if stats else torch.zeros(0)
    tensors = [(f'{k}.params', f32(params)), (f'{k}.input', x), (f'{k}.labels', y.astype(np.int64)),
               (f'{k}.logp_eval', f32(logp_eval)), (f'{k}.logp', f32(logp)),
               (f'{k}.grad', f32(grad)), (f'{k}.report', f32(report))]
    doubt = None
    if soak and near:
        doubt = 'a value next to a kink'
    elif soak and float32_violation(seq, x, y, grad.detach()) > FLOAT32_LIMIT:
        doubt = 'ill-conditioned'  # PyTorch's own float32 gradient far from its float64 one
    return text, tensors, doubt


def gen_random_models(path, count=RANDOM_MODELS, seed=2026, soak=False):
    """count models drawn from seed; with soak, those float32 cannot be held to are drawn but
    left out (the first RANDOM_NARROW narrow, then wide; with soak, of every four drawn two
    narrow, one wide and one large)."""
    g = np.random.default_rng(seed)
    # 'models' first (the committed fixture's order of keys); the count kept is set below
    tensors, meta = [], {'models': count, 'batch': RANDOM_BATCH,
                         'dropout_key': ' '.join(map(str, DROPOUT_KEY)),
                         'generator': f'tools/gen_fixtures.py, torch {torch.__version__}'}
    kept, doubts = 0, collections.Counter()
    for k in range(count):
        wide = k % 2 == 1 if soak else k >= RANDOM_NARROW
        text, t, doubt = random_model_case(kept, g, wide, soak, soak and k % 4 == 3)
        if doubt:
            doubts[doubt] += 1
            continue
        meta[f'model.{kept}'] = text
        tensors += t
        kept += 1
    meta['models'] = kept
    if soak:
        meta['tolerance_scale'] = SOAK_TOLERANCE_SCALE
        meta['soak'] = f'seed {seed}: {kept} of {count} drawn kept, set aside: {dict(doubts)}'
        print(meta['soak'])
    write_safetensors(path, tensors, meta)


OUTPUTS = ['layers', 'layers_pool_dropout', 'conv_stride_padding', 'label_smoothing',
           'model_steps', 'model_steps_smooth', 'lr_schedule', 'pytorch_model', 'random_models']


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(here, '..', 'tests', 'fixtures'))
    ap.add_argument('--data-dir', default=DATA_DIR)
    ap.add_argument('--only', choices=OUTPUTS, help='write this output alone')
    ap.add_argument('--random-models', type=int, default=RANDOM_MODELS, metavar='N',
                    help=f'random_models: draw N models (default {RANDOM_MODELS})')
    ap.add_argument('--random-seed', type=int, default=2026, metavar='S',
                    help='random_models: from generator seed S (default 2026)')
    ap.add_argument('--soak', action='store_true',
                    help='random_models: leave out models that float32 cannot be held to')
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    train, test = load_split('train', a.data_dir), load_split('t10k', a.data_dir)
    writers = {'layers': lambda path: gen_layers(path),
               'layers_pool_dropout': lambda path: gen_layers_pool_dropout(path),
               'conv_stride_padding': lambda path: gen_conv_stride_padding(path),
               'label_smoothing': lambda path: write_cases(path, [lambda: case_smoothing(11, 0.1)]),
               'model_steps': lambda path: gen_model_steps(path, train),
               'model_steps_smooth': lambda path: gen_model_steps(path, train, 0.1),
               'lr_schedule': gen_lr_schedule,
               'pytorch_model': lambda path: gen_pytorch_model(path, train, test),
               'random_models': lambda path: gen_random_models(path, a.random_models,
                                                                a.random_seed, a.soak)}
    for name in OUTPUTS:
        if a.only in (None, name):
            writers[name](os.path.join(a.out, name + '.safetensors'))


if __name__ == '__main__':
    main()
