"""predict_colour.py — the colour case of tests/cli_predict.sh: writes a model of
models/cifar10.model with PyTorch's random weights (and random BatchNorm statistics) as a
safetensors file with its model text and class names (the last layer's weights scaled up, so
that the probabilities differ widely), three images (a colour PNG of 48x40, a
light grey PNG of 32x32, a copy of a 28x28 colour JPEG fixture, a CMYK JPEG of 36x30), and prints for each the ten
probabilities PyTorch gives to the pixels that cnnc should see: PIL's convert("RGB"), then
resize to 32x32 with BOX where a side shrinks and BILINEAR where it grows.
Usage: python3 tests/predict_colour.py ROOT OUT_DIR"""
import shutil
import sys

import numpy as np
import torch
from PIL import Image

root, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, f'{root}/tools')
import cnnc_torch as ct  # noqa: E402

NAMES = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship',
         'truck']

torch.manual_seed(7)
lines, model = ct.load_model(f'{root}/models/cifar10.model')
for m in model.modules():
    if isinstance(m, torch.nn.BatchNorm2d):
        m.running_mean.uniform_(-0.2, 0.2)
        m.running_var.uniform_(0.5, 1.5)
with torch.no_grad():  # spread the probabilities, so that a wrong pixel shows
    model.fc2.weight.mul_(30)
model.eval()
ct.write_safetensors(f'{out}/colour.safetensors', ct.state_tensors(model),
                     {'model': ct.model_text(lines), 'classes': '\n'.join(NAMES)})

rng = np.random.default_rng(3)
Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8), 'RGB').save(
    f'{out}/colour.png')
Image.fromarray(rng.integers(180, 256, (32, 32), dtype=np.uint8), 'L').save(f'{out}/light.png')
shutil.copy(f'{root}/tests/fixtures/predict/t10k-9-colour.jpg', f'{out}/colour.jpg')
Image.fromarray(rng.integers(0, 256, (30, 36, 4), dtype=np.uint8), 'CMYK').save(
    f'{out}/cmyk.jpg', quality=90)


FILES = ('colour.png', 'light.png', 'colour.jpg', 'cmyk.jpg')


def as_cnnc(path):
    img = Image.open(path).convert('RGB')
    w, h = img.size
    if w != 32:
        img = img.resize((32, h), Image.BOX if w > 32 else Image.BILINEAR)
    if h != 32:
        img = img.resize((32, 32), Image.BOX if h > 32 else Image.BILINEAR)
    return np.asarray(img).transpose(2, 0, 1)


pixels = np.stack([as_cnnc(f'{out}/{n}') for n in FILES])
x = ct.normalize(pixels, ct.channel_values(lines, 'mean'), ct.channel_values(lines, 'std'))
with torch.no_grad():
    probs = model(x).exp().numpy()
for name, p in zip(FILES, probs):
    print(name, NAMES[int(p.argmax())], ' '.join(f'{v:.6f}' for v in p))
