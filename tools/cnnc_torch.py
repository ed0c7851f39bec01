"""cnnc_torch.py — cnnc's model files and safetensors files in PyTorch.

As a module: parse_model (a model file's text into layer lines), build (those lines into an
nn.Sequential whose state_dict names are cnnc's tensor names), read_safetensors /
write_safetensors, load_checkpoint, read_idx / load_split / normalize (Fashion-MNIST IDX files,
with the model's input normalisation), evaluate, train_epoch and model_text (the text cnnc
records in a file's __metadata__ "model").

As a command (Debian's interpreter, python3-torch 1.13: /usr/bin/python3 tools/cnnc_torch.py):
  describe MODEL                      the Sequential, its tensors and its parameter count
  eval --checkpoint FILE [--model M]  a cnnc checkpoint or --save file scored in PyTorch
  train --model M --save FILE         SGD in PyTorch; writes a model-only file cnnc evaluates

Deliberately not here: the safetensors package (a few lines of json and struct read and write
the format), dtypes other than F32 and I64 (cnnc writes and reads only those), data formats
other than IDX, and the refusals cnnc gives for values its layers cannot compute: this builds
whatever PyTorch can.
"""
import argparse
import collections
import gzip
import json
import math
import os
import re
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = '/usr/share/datasets/fashion-mnist'
SEED_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'models',
                          'fashion_mnist.model')
NEAR_TIE = 1e-4  # a top-2 log-probability gap below this may flip between implementations

# kind: ({key: type}, required keys); types: i whole >= 1, z whole >= 0, f number, b 0 or 1,
# n name, l list of numbers
KINDS = {
    'input': ({'channels': 'i', 'height': 'i', 'width': 'i', 'mean': 'l', 'std': 'l'},
              ('channels', 'height', 'width')),
    'conv2d': ({'name': 'n', 'out': 'i', 'kernel': 'i', 'stride': 'i', 'padding': 'z',
                'bias': 'b'}, ('out', 'kernel')),
    'maxpool2d': ({'kernel': 'i', 'stride': 'i'}, ('kernel',)),
    'avgpool2d': ({'kernel': 'i', 'stride': 'i'}, ('kernel',)),
    'global_avgpool': ({}, ()),
    'batchnorm2d': ({'name': 'n', 'momentum': 'f', 'eps': 'f'}, ()),
    'batchnorm1d': ({'name': 'n', 'momentum': 'f', 'eps': 'f'}, ()),
    'relu': ({}, ()),
    'dropout': ({'p': 'f'}, ('p',)),
    'flatten': ({}, ()),
    'linear': ({'name': 'n', 'out': 'i', 'bias': 'b'}, ('out',)),
    'log_softmax': ({}, ()),
}
NAMED = ('conv2d', 'batchnorm2d', 'batchnorm1d', 'linear')
SPATIAL = ('conv2d', 'maxpool2d', 'avgpool2d', 'global_avgpool', 'batchnorm2d')
FLAT = ('linear', 'batchnorm1d', 'log_softmax')


class ModelError(ValueError):
    """A model file cnnc would refuse: the message is 'SOURCE:LINE: reason'."""


# ---------------------------------------------------------------- model files

def parse_value(kind, key, text, where):
    t = KINDS[kind][0][key]
    try:
        if t in 'iz' and re.fullmatch('[0-9]{1,9}', text) and int(text) >= (t == 'i'):
            return int(text)
        if t == 'b' and text in ('0', '1'):
            return int(text)
        if t == 'f' and math.isfinite(float(text)):
            return float(text)
        if t == 'n' and re.fullmatch('[A-Za-z0-9_]{1,39}', text):
            return text
        if t == 'l' and all(math.isfinite(float(x)) for x in text.split(',')):
            return [float(x) for x in text.split(',')]
    except ValueError:
        pass
    raise ModelError(f'{where}: {kind}: {key}={text}: malformed value')


def parse_line(words, where):
    kind = words[0]
    if kind not in KINDS:
        raise ModelError(f"{where}: unknown layer kind '{kind}'")
    keys, required = KINDS[kind]
    values = {}
    for w in words[1:]:
        key, eq, text = w.partition('=')
        if not eq or key not in keys:
            raise ModelError(f"{where}: {kind}: unknown key '{key}'")
        if key in values:
            raise ModelError(f'{where}: {kind}: {key} given twice')
        values[key] = parse_value(kind, key, text, where)
    for key in required:
        if key not in values:
            raise ModelError(f'{where}: {kind}: {key}= is missing')
    return kind, values


def parse_model(text, source='model'):
    """The lines of a model file as [(kind, {key: value}, line number)], input first, checked
    for order; each layer's 'name' is its name= or its position after input."""
    lines = []
    for number, line in enumerate(text.split('\n'), 1):
        words = line.split('#', 1)[0].split()
        if not words:
            continue
        where = f'{source}:{number}'
        kind, values = parse_line(words, where)
        if (kind == 'input') != (not lines):
            raise ModelError(f'{where}: {kind}: the first line, and only it, must be input')
        if lines and lines[-1][0] == 'log_softmax':
            raise ModelError(f'{where}: {kind} after log_softmax: it must be the last line')
        if kind != 'input':
            values.setdefault('name', str(len(lines) - 1))
        lines.append((kind, values, number))
    if not lines or lines[-1][0] != 'log_softmax':
        raise ModelError(f'{source}: the model must start with input and end with log_softmax')
    names = [v['name'] for _, v, _ in lines[1:]]
    for (kind, v, number), name in zip(lines[1:], names):
        if names.count(name) > 1:
            raise ModelError(f"{source}:{number}: name '{name}' is the name of another layer")
    return lines


def layer_module(kind, v, shape, where):
    """The module for one layer on an input of shape (C, H, W) or (features,), and its output
    shape."""
    if (kind in SPATIAL and len(shape) != 3) or (kind in FLAT and len(shape) != 1):
        raise ModelError(f'{where}: {kind}: does not take a {"x".join(map(str, shape))} input'
                         + (': put flatten before it' if kind in FLAT else ''))
    if kind in ('conv2d', 'maxpool2d', 'avgpool2d'):
        k, p = v['kernel'], v.get('padding', 0)
        s = v.get('stride', 1 if kind == 'conv2d' else k)
        c, h, w = shape
        if k > h + 2 * p or k > w + 2 * p:
            raise ModelError(f'{where}: {kind}: kernel={k} does not fit its input {c}x{h}x{w}')
        h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        if kind == 'conv2d':
            m = nn.Conv2d(c, v['out'], k, stride=s, padding=p, bias=bool(v.get('bias', 1)))
            return m, (v['out'], h, w)
        return (nn.MaxPool2d if kind == 'maxpool2d' else nn.AvgPool2d)(k, s), (c, h, w)
    if kind in ('batchnorm2d', 'batchnorm1d'):
        bn = nn.BatchNorm2d if kind == 'batchnorm2d' else nn.BatchNorm1d
        return bn(shape[0], eps=v.get('eps', 1e-5), momentum=v.get('momentum', 0.1)), shape
    if kind == 'linear':
        return nn.Linear(shape[0], v['out'], bias=bool(v.get('bias', 1))), (v['out'],)
    if kind == 'global_avgpool':  # gives flat features, as cnnc's does (Keras' meaning)
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()), (shape[0],)
    if kind == 'flatten':
        return nn.Flatten(), (int(np.prod(shape)),)
    if kind == 'dropout':
        if not 0 <= v['p'] < 1:
            raise ModelError(f"{where}: dropout: p={v['p']:g}: must be at least 0 and below 1")
        return nn.Dropout(v['p']), shape
    if kind == 'relu':
        return nn.ReLU(), shape
    return nn.LogSoftmax(dim=1), shape


def build(lines, source='model'):
    """nn.Sequential of the layers after input, each under its name, and the output shape."""
    shape = tuple(lines[0][1][k] for k in ('channels', 'height', 'width'))
    modules = collections.OrderedDict()
    for kind, v, number in lines[1:]:
        modules[v['name']], shape = layer_module(kind, v, shape, f'{source}:{number}')
    return nn.Sequential(modules), shape


def load_model(path):
    """(lines, Sequential) from a model file."""
    with open(path) as f:
        lines = parse_model(f.read(), path)
    return lines, build(lines, path)[0]


def channel_values(lines, key):
    """The input's mean or std per channel, or None when the file leaves it out."""
    v, c = lines[0][1], lines[0][1]['channels']
    if key not in v:
        return None
    if len(v[key]) not in (1, c):
        raise ModelError(f'input: {key}= has {len(v[key])} values for {c} channels')
    return v[key] * c if len(v[key]) == 1 else v[key]


def model_text(lines):
    """The model as cnnc records it: one line per layer, names filled in, comments dropped."""
    out = []
    for kind, v, _ in lines:
        words = [kind] + ([f"name={v['name']}"] if kind in NAMED else [])
        for key, value in v.items():
            if key == 'name':
                continue
            if isinstance(value, list):
                value = ','.join(f'{x:.9g}' for x in value)
            elif isinstance(value, float):
                value = f'{value:.9g}'
            words.append(f'{key}={value}')
        out.append(' '.join(words))
    return '\n'.join(out) + '\n'


def with_normalisation(lines, mean, std):
    """The lines with the input's mean and std set (as computed from the training set)."""
    kind, v, number = lines[0]
    return [(kind, dict(v, mean=list(mean), std=list(std)), number)] + lines[1:]


# ---------------------------------------------------------------- safetensors

DTYPES = {'F32': ('<f4', np.float32), 'I64': ('<i8', np.int64)}


def write_safetensors(path, tensors, meta):
    """tensors: list of (name, array); arrays become F32 or I64, little-endian, in list order.
    Written to a temporary name and renamed: a reader never sees half a file."""
    header, blobs, offset = {}, [], 0
    header['__metadata__'] = dict({'format': 'pt'}, **{k: str(v) for k, v in meta.items()})
    for name, arr in tensors:
        arr = np.asarray(arr)
        if arr.dtype == np.float32:
            dtype, data = 'F32', arr.astype('<f4').tobytes()
        elif arr.dtype == np.int64:
            dtype, data = 'I64', arr.astype('<i8').tobytes()
        else:
            raise ValueError(f'{name}: dtype {arr.dtype} not supported (F32/I64 only)')
        assert name not in header, name
        header[name] = {'dtype': dtype, 'shape': list(arr.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return 8 + len(text) + offset


def read_safetensors(path):
    """({name: numpy array}, metadata dict) of a safetensors file with F32 and I64 tensors."""
    with open(path, 'rb') as f:
        data = f.read()
    (n,) = struct.unpack('<Q', data[:8])
    if n > len(data) - 8:
        raise ValueError(f'{path}: the header length {n} is past the end of the file')
    header = json.loads(data[8:8 + n])
    meta = header.pop('__metadata__', {})
    tensors = {}
    for name, h in header.items():
        if h['dtype'] not in DTYPES:
            raise ValueError(f'{path}: {name}: dtype {h["dtype"]} (F32 and I64 only)')
        start, end = h['data_offsets']
        arr = np.frombuffer(data[8 + n + start:8 + n + end], DTYPES[h['dtype']][0])
        tensors[name] = arr.astype(DTYPES[h['dtype']][1]).reshape(h['shape'])
    return tensors, meta


def state_tensors(model):
    """The model's state_dict as (name, numpy array) pairs, F32 or I64."""
    res = []
    for name, t in model.state_dict().items():
        dtype = np.int64 if t.dtype == torch.int64 else np.float32
        res.append((name, np.array(t.detach().cpu().numpy(), dtype=dtype, copy=True)))
    return res


def load_checkpoint(path, model_path=None):
    """(lines, Sequential with the file's weights) from a cnnc checkpoint, a --save file or a
    model-only file; the network is --model's file when given, else the file's metadata
    "model". The file's optimizer.* tensors are left out; any other tensor the model does not
    have, or one it misses, is an error. A file with neither is the seed's network, as in
    cnnc."""
    tensors, meta = read_safetensors(path)
    if model_path:
        lines, model = load_model(model_path)
    elif 'model' in meta:
        lines = parse_model(meta['model'], f'{path} (metadata "model")')
        model = build(lines, path)[0]
    else:
        lines, model = load_model(SEED_MODEL)
    state = {k: torch.from_numpy(np.array(a)) for k, a in tensors.items()
             if not k.startswith('optimizer.')}
    model.load_state_dict(state, strict=True)
    return lines, model


# ---------------------------------------------------------------- data

def read_idx(path):
    """An IDX file (raw or .gz) as a numpy uint8 array of its dimensions."""
    b = (gzip.open if path.endswith('.gz') else open)(path, 'rb').read()
    nd = b[3]
    dims = struct.unpack('>' + 'I' * nd, b[4:4 + 4 * nd])
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def idx_path(data_dir, name):
    path = os.path.join(data_dir, name)
    return path if os.path.exists(path) else path + '.gz'


def load_split(data_dir, split, samples=0):
    """Raw uint8 images [N,C,H,W] and int64 labels [N] of 'train' or 't10k', the first
    `samples` of them when nonzero."""
    x = read_idx(idx_path(data_dir, f'{split}-images-idx3-ubyte'))
    y = read_idx(idx_path(data_dir, f'{split}-labels-idx1-ubyte')).astype(np.int64)
    if samples:
        x, y = x[:samples], y[:samples]
    return (x[:, None] if x.ndim == 3 else x), y


def pixel_statistics(pixels):
    """Per channel mean and standard deviation of x/255 over a set of uint8 images [N,C,H,W]."""
    x = pixels.astype(np.float64) / 255.0
    return x.mean(axis=(0, 2, 3)).tolist(), x.std(axis=(0, 2, 3)).tolist()


def normalize(pixels, mean, std):
    """(x/255 - mean[c]) / std[c], every operation in float32, as a tensor [N,C,H,W]."""
    x = pixels.astype(np.float32) / np.float32(255)
    c = (1, -1, 1, 1)
    x = (x - np.array(mean, np.float32).reshape(c)) / np.array(std, np.float32).reshape(c)
    return torch.from_numpy(x.astype(np.float32))


# ---------------------------------------------------------------- training and evaluation

def evaluate(model, x, y, batch=1000):
    """(mean loss, correct, near ties): near ties are samples whose two largest
    log-probabilities differ by less than NEAR_TIE, so that another float32 implementation
    may answer them otherwise."""
    model.eval()
    loss, correct, ties = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out = model(x[i:i + batch])
            loss += float(F.nll_loss(out, y[i:i + batch], reduction='sum'))
            correct += int((out.argmax(1) == y[i:i + batch]).sum())
            top2 = out.topk(2, dim=1).values
            ties += int(((top2[:, 0] - top2[:, 1]) < NEAR_TIE).sum())
    return loss / len(x), correct, ties


def train_epoch(model, opt, x, y, batch, generator):
    """One epoch of SGD in the order of torch.randperm, the last partial batch dropped (as the
    seed's DataLoader with drop_last); (mean loss, correct)."""
    model.train()
    perm = torch.randperm(len(x), generator=generator)
    loss, correct, steps = 0.0, 0, len(x) // batch
    for s in range(steps):
        idx = perm[s * batch:(s + 1) * batch]
        opt.zero_grad()
        out = model(x[idx])
        step_loss = F.nll_loss(out, y[idx])
        step_loss.backward()
        opt.step()
        loss += float(step_loss)
        correct += int((out.argmax(1) == y[idx]).sum())
    return loss / max(steps, 1), correct


def report(loss, correct, ties, n):
    print(f'Test loss={loss:.4f}')
    print(f'Accuracy={100.0 * correct / n:.2f}%')
    print(f'correct={correct} samples={n} near_ties={ties}')


def command_eval(a):
    lines, model = load_checkpoint(a.checkpoint, a.model)
    mean, std = channel_values(lines, 'mean'), channel_values(lines, 'std')
    if mean is None or std is None:
        raise ModelError(f'{a.checkpoint}: the model gives no input mean and std')
    xt, yt = load_split(a.data_dir, 't10k', a.test_samples)
    report(*evaluate(model, normalize(xt, mean, std), torch.from_numpy(yt)), len(yt))


def command_train(a):
    lines = parse_model(open(a.model).read(), a.model)
    torch.manual_seed(a.seed)
    model = build(lines, a.model)[0]
    x, y = load_split(a.data_dir, 'train', a.train_samples)
    xt, yt = load_split(a.data_dir, 't10k', a.test_samples)
    mean, std = channel_values(lines, 'mean'), channel_values(lines, 'std')
    if mean is None or std is None:
        mean, std = pixel_statistics(x)
        lines = with_normalisation(lines, mean, std)
    x, y = normalize(x, mean, std), torch.from_numpy(y)
    xt, yt = normalize(xt, mean, std), torch.from_numpy(yt)
    opt = torch.optim.SGD(model.parameters(), lr=a.learning_rate, momentum=a.momentum)
    generator = torch.Generator().manual_seed(a.seed)
    for epoch in range(1, a.epochs + 1):
        loss, correct = train_epoch(model, opt, x, y, a.batch_size, generator)
        steps = len(x) // a.batch_size
        test = evaluate(model, xt, yt)
        print(f'Epoch {epoch}/{a.epochs}  train loss {loss:.4f} acc '
              f'{100.0 * correct / max(steps * a.batch_size, 1):.2f}%  test loss {test[0]:.4f} '
              f'acc {100.0 * test[1] / len(yt):.2f}%', flush=True)
    meta = {'generator': f'tools/cnnc_torch.py, torch {torch.__version__}'}
    if not a.no_model_metadata:
        meta['model'] = model_text(lines)
    write_safetensors(a.save, state_tensors(model), meta)
    report(*test, len(yt))


def command_describe(a):
    lines, model = load_model(a.model)
    print(model)
    for name, t in model.state_dict().items():
        print(f'{name} {list(t.shape)} {str(t.dtype).replace("torch.", "")}')
    print(f'parameters={sum(p.numel() for p in model.parameters())}')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='command', required=True)
    d = sub.add_parser('describe', help='the network of a model file')
    d.add_argument('model')
    e = sub.add_parser('eval', help='score a cnnc safetensors file on the test set')
    e.add_argument('--checkpoint', required=True)
    e.add_argument('--model', help='the network (default: the file\'s metadata "model", '
                   'else the seed\'s network)')
    t = sub.add_parser('train', help='train a model file in PyTorch and save it for cnnc')
    t.add_argument('--model', required=True)
    t.add_argument('--save', required=True)
    t.add_argument('--epochs', type=int, default=1)
    t.add_argument('--batch-size', type=int, default=64)
    t.add_argument('--learning-rate', type=float, default=0.01)
    t.add_argument('--momentum', type=float, default=0.5)
    t.add_argument('--seed', type=int, default=1)
    t.add_argument('--train-samples', type=int, default=0, help='the first N; 0 = all')
    t.add_argument('--no-model-metadata', action='store_true',
                   help='leave the model text out of the file (cnnc eval then needs --model)')
    for p in (e, t):
        p.add_argument('--data-dir', default=DATA_DIR)
        p.add_argument('--test-samples', type=int, default=0, help='the first N; 0 = all')
        p.add_argument('--threads', type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(getattr(a, 'threads', 1))
    try:
        {'describe': command_describe, 'eval': command_eval, 'train': command_train}[
            a.command](a)
    except (ModelError, ValueError, OSError, RuntimeError) as err:
        print(f'cnnc_torch: error: {err}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
