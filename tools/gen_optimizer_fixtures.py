"""gen_optimizer_fixtures.py — writes tests/fixtures/optimizers.safetensors: what torch.optim's SGD
and AdamW do to a tiny model's parameters over a fixed sequence of gradients, for
tests/test_optimizers.c.

Tensors (N = 17: a [3, 4] weight followed by a [5] bias, flattened in that order):
  params            [N]     the parameters before the first step
  grads             [S, N]  the gradient given at each of S = 5 steps
  CASE.params       [S, N]  the parameters after each step, for each CASE below
__metadata__ holds, per CASE, CASE.optimizer (sgd|adamw), CASE.lr, CASE.momentum,
CASE.nesterov, CASE.weight_decay, CASE.beta1, CASE.beta2, CASE.eps (the last three adamw's).
Every number is an fp32 value, so the C side configures exactly what PyTorch ran.

Run with Debian's interpreter (python3-torch 1.13):
/usr/bin/python3 tools/gen_optimizer_fixtures.py
Deterministic: a fixed seed, one thread. Not here: the tolerance, which the test decides.
"""
import argparse
import os

import numpy as np
import torch

import cnnc_torch  # tools/, beside this script

STEPS = 5
CASES = {
    'sgd_momentum': dict(optimizer='sgd', lr=0.1, momentum=0.5, nesterov=0, weight_decay=0.0),
    'sgd_nesterov': dict(optimizer='sgd', lr=0.1, momentum=0.9, nesterov=1, weight_decay=0.0),
    'sgd_weight_decay': dict(optimizer='sgd', lr=0.05, momentum=0.5, nesterov=0,
                             weight_decay=0.1),
    'adamw': dict(optimizer='adamw', lr=0.01, weight_decay=0.0, beta1=0.9, beta2=0.999,
                  eps=1e-8),
    'adamw_weight_decay': dict(optimizer='adamw', lr=0.02, weight_decay=0.5, beta1=0.8,
                               beta2=0.99, eps=1e-6),
}


def f32(x):
    return float(np.float32(x))


def run(case, params0, grads):
    ps = [torch.tensor(a.copy()) for a in params0]
    for p in ps:
        p.requires_grad_(True)
    c = {k: (f32(v) if isinstance(v, float) else v) for k, v in case.items()}
    if c['optimizer'] == 'sgd':
        opt = torch.optim.SGD(ps, lr=c['lr'], momentum=c['momentum'],
                              nesterov=bool(c['nesterov']), weight_decay=c['weight_decay'])
    else:
        opt = torch.optim.AdamW(ps, lr=c['lr'], betas=(c['beta1'], c['beta2']), eps=c['eps'],
                                weight_decay=c['weight_decay'])
    out = []
    for g in grads:
        at = 0
        for p in ps:
            n = p.numel()
            p.grad = torch.tensor(g[at:at + n].reshape(p.shape))
            at += n
        opt.step()
        out.append(np.concatenate([p.detach().numpy().ravel() for p in ps]))
    return np.stack(out).astype(np.float32)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(here, '..', 'tests', 'fixtures'))
    a = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(11)
    params0 = [rng.standard_normal((3, 4)).astype(np.float32),
               rng.standard_normal(5).astype(np.float32)]
    flat = np.concatenate([p.ravel() for p in params0])
    grads = rng.standard_normal((STEPS, flat.size)).astype(np.float32)
    tensors, meta = [('params', flat), ('grads', grads)], {}
    for name, case in CASES.items():
        tensors.append((name + '.params', run(case, params0, grads)))
        for k, v in case.items():
            meta[f'{name}.{k}'] = repr(f32(v)) if isinstance(v, float) else v
    cnnc_torch.write_safetensors(os.path.join(a.out, 'optimizers.safetensors'), tensors, meta)


if __name__ == '__main__':
    main()
