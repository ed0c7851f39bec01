"""gen_predict_fixtures.py — writes the image fixtures of `cnnc predict` and what PyTorch predicts
for them with the PyTorch-trained model tests/fixtures/pytorch_model.safetensors.

Outputs (in tests/fixtures/predict/ unless --out is given), each from a Fashion-MNIST test image:
  t10k-0.png            8-bit grey PNG
  t10k-1.pgm            binary PGM (P5), maxval 255
  t10k-2.pgm            plain PGM (P2) with comments and uneven white space
  t10k-3-16bit.pgm      binary PGM, maxval 65535 (two bytes a sample)
  t10k-4-rgb.png        colour PNG: its grey is PIL's luma of the colours
  t10k-5-rgba.png       RGBA PNG: the object opaque, the background transparent over random colours
  t10k-6-grey-alpha.png grey + alpha PNG, all opaque
  t10k-7-inverted.pgm   dark object on white (255 - v): inverted by `cnnc predict` on its own
  t10k-8.jpg            grey JPEG (quality 90)
  t10k-9-colour.jpg     colour JPEG (the colours of t10k-4-rgb.png; 4:2:0 chroma)
  t10k-10-56x56.png     enlarged to 56x56 (bilinear): cnnc shrinks it back
  t10k-11-20x40.pgm     20 wide (area average), 40 high (bilinear): cnnc scales both sides back
  t10k-12-photo.jpg     a "photo": 100x80, dark object on white, in colour, progressive JPEG
  wrong-size.png        32x32 black, wrong-size.pgm 27x28 black: scaled to 28x28
  expected.txt          one line per image file: name, test index, the grey pixels' PyTorch class
                        and ten probabilities; then "idx I LABEL CLASS p0..p9" for test images
                        0..19, predicted from the IDX file itself
  pil/NAME.pgm          for each JPEG and each image of another size than 28x28: the 28x28 grey
                        pixels PIL makes of it (Image.open, convert("L"), resize with BOX along
                        a side that shrinks and BILINEAR along one that grows), before any
                        inversion; the pixels that cnnc must read

Run with Debian's interpreters (python3-torch 1.13, python3-pil 9.4 with libjpeg-turbo):
/usr/bin/python3 tools/gen_predict_fixtures.py
PNG files are written with zlib by hand; JPEG files and resized images by PIL. Deterministic for a
given libjpeg-turbo. Not here: anything the C tests decide (which tolerance, which messages).
"""
import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import DATA_DIR, FashionMNIST, load_split, normalize  # noqa: E402

NUM_IDX = 20


# ---------------------------------------------------------------- file writers

def png_chunk(kind, data):
    body = kind + data
    return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body) & 0xffffffff)


def write_png(path, rows, colour_type):
    """rows: uint8 array [H, W * channels]; colour_type 0 grey, 2 RGB, 4 grey+alpha, 6 RGBA."""
    h = rows.shape[0]
    w = rows.shape[1] // {0: 1, 2: 3, 4: 2, 6: 4}[colour_type]
    raw = b''.join(b'\0' + rows[y].tobytes() for y in range(h))  # filter type 0 on every row
    data = (b'\x89PNG\r\n\x1a\n' +
            png_chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, colour_type, 0, 0, 0)) +
            png_chunk(b'IDAT', zlib.compress(raw, 9)) + png_chunk(b'IEND', b''))
    with open(path, 'wb') as f:
        f.write(data)


def write_pgm_binary(path, img, maxval):
    header = f'P5\n# Fashion-MNIST test image\n{img.shape[1]} {img.shape[0]}\n{maxval}\n'
    dtype = '>u2' if maxval > 255 else 'u1'
    with open(path, 'wb') as f:
        f.write(header.encode() + img.astype(dtype).tobytes())


def write_pgm_plain(path, img):
    lines = ['P2', '# plain PGM', f'{img.shape[1]}  {img.shape[0]}', '# maxval next', '255']
    for row in img:
        lines.append(' '.join(str(v) for v in row[:14]))
        lines.append('\t' + '  '.join(str(v) for v in row[14:]))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def write_jpeg(path, img, **options):
    """img: uint8 [H, W] (grey) or [H, W, 3] (RGB)."""
    Image.fromarray(img, 'L' if img.ndim == 2 else 'RGB').save(path, 'JPEG', quality=90,
                                                               **options)


def pil_resize(img, width, height):
    """PIL's resize, each side on its own: BOX along a side that shrinks, BILINEAR along one that
    grows (width first, as PIL's own two passes)."""
    im = Image.fromarray(img, 'L')
    if width != im.width:
        im = im.resize((width, im.height), Image.BOX if width < im.width else Image.BILINEAR)
    if height != im.height:
        im = im.resize((width, height), Image.BOX if height < im.height else Image.BILINEAR)
    return np.asarray(im)


def pil_read(path):
    """The 28x28 grey pixels PIL makes of an image file."""
    return pil_resize(np.asarray(Image.open(path).convert('L')), 28, 28)


def luma(rgb):
    """PIL's convert('L'), as cnnc computes it."""
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


# ---------------------------------------------------------------- the model

def read_safetensors(path):
    with open(path, 'rb') as f:
        blob = f.read()
    n = struct.unpack('<Q', blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop('__metadata__', None)
    data, out = blob[8 + n:], {}
    for name, e in header.items():
        a, b = e['data_offsets']
        dtype = {'F32': '<f4', 'I64': '<i8'}[e['dtype']]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype).reshape(e['shape']).copy())
    return out


def probabilities(model, images):
    with torch.no_grad():
        return model(normalize(np.asarray(images, dtype=np.uint8))).exp().numpy()


def predicted(p):
    """The class and the ten probabilities, as text."""
    return f'{int(p.argmax())} ' + ' '.join(f'{v:.6f}' for v in p)


# ---------------------------------------------------------------- main

def write_images(out, imgs):
    """Writes the image files; returns [(file, test index, grey image it decodes to)]."""
    rng = np.random.default_rng(4)
    write_png(os.path.join(out, 't10k-0.png'), imgs[0], 0)
    write_pgm_binary(os.path.join(out, 't10k-1.pgm'), imgs[1], 255)
    write_pgm_plain(os.path.join(out, 't10k-2.pgm'), imgs[2])
    write_pgm_binary(os.path.join(out, 't10k-3-16bit.pgm'), imgs[3].astype(np.uint32) * 257, 65535)
    v = imgs[4].astype(np.uint32)
    rgb = np.stack([v, v * 3 // 4, 255 - v // 2], axis=-1).astype(np.uint8)
    write_png(os.path.join(out, 't10k-4-rgb.png'), rgb.reshape(28, -1), 2)
    v = imgs[5]
    rgba = rng.integers(0, 256, size=(28, 28, 4), dtype=np.uint8)
    rgba[..., 3] = np.where(v > 0, 255, 0)
    for c in range(3):
        rgba[..., c] = np.where(v > 0, v, rgba[..., c])
    write_png(os.path.join(out, 't10k-5-rgba.png'), rgba.reshape(28, -1), 6)
    ga = np.stack([imgs[6], np.full((28, 28), 255, np.uint8)], axis=-1)
    write_png(os.path.join(out, 't10k-6-grey-alpha.png'), ga.reshape(28, -1), 4)
    write_pgm_binary(os.path.join(out, 't10k-7-inverted.pgm'), 255 - imgs[7], 255)
    write_png(os.path.join(out, 'wrong-size.png'), np.zeros((32, 32), np.uint8), 0)
    write_pgm_binary(os.path.join(out, 'wrong-size.pgm'), np.zeros((28, 27), np.uint8), 255)
    return [('t10k-0.png', 0, imgs[0]), ('t10k-1.pgm', 1, imgs[1]), ('t10k-2.pgm', 2, imgs[2]),
            ('t10k-3-16bit.pgm', 3, imgs[3]), ('t10k-4-rgb.png', 4, luma(rgb)),
            ('t10k-5-rgba.png', 5, imgs[5]), ('t10k-6-grey-alpha.png', 6, imgs[6]),
            ('t10k-7-inverted.pgm', 7, imgs[7])] + write_decoded_images(out, imgs)


def write_decoded_images(out, imgs):
    """The JPEG files and the images of other sizes, with PIL's reading of each in pil/;
    returns [(file, test index, grey image the model sees)]."""
    os.makedirs(os.path.join(out, 'pil'), exist_ok=True)
    write_jpeg(os.path.join(out, 't10k-8.jpg'), imgs[8])
    v = imgs[9].astype(np.uint32)
    write_jpeg(os.path.join(out, 't10k-9-colour.jpg'),
               np.stack([v, v * 3 // 4, 255 - v // 2], axis=-1).astype(np.uint8))
    write_png(os.path.join(out, 't10k-10-56x56.png'), pil_resize(imgs[10], 56, 56), 0)
    write_pgm_binary(os.path.join(out, 't10k-11-20x40.pgm'), pil_resize(imgs[11], 20, 40), 255)
    v = 255 - pil_resize(imgs[12], 100, 80).astype(np.uint32)
    write_jpeg(os.path.join(out, 't10k-12-photo.jpg'),
               np.stack([v, v * 7 // 8, v * 3 // 4], axis=-1).astype(np.uint8), progressive=True)
    names = [('t10k-8.jpg', 8, False), ('t10k-9-colour.jpg', 9, False),
             ('t10k-10-56x56.png', 10, False), ('t10k-11-20x40.pgm', 11, False),
             ('t10k-12-photo.jpg', 12, True), ('wrong-size.png', 0, False),
             ('wrong-size.pgm', 0, False)]
    files = []
    for name, index, inverted in names:
        grey = pil_read(os.path.join(out, name))
        write_pgm_binary(os.path.join(out, 'pil', name + '.pgm'), grey, 255)
        if not name.startswith('wrong-size'):
            files.append((name, index, 255 - grey if inverted else grey))
    return files


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.path.join(here, '..', 'tests', 'fixtures')
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(fixtures, 'predict'))
    ap.add_argument('--model', default=os.path.join(fixtures, 'pytorch_model.safetensors'))
    ap.add_argument('--data-dir', default=DATA_DIR)
    a = ap.parse_args()
    torch.set_num_threads(1)
    test = load_split('t10k', a.data_dir)
    if test is None:
        raise SystemExit(f'Fashion-MNIST not found in {a.data_dir}')
    model = FashionMNIST()
    model.load_state_dict(read_safetensors(a.model))
    model.eval()
    os.makedirs(a.out, exist_ok=True)
    files = write_images(a.out, test[0])
    p = probabilities(model, [grey for _, _, grey in files])
    lines = [f'{name} {index} {predicted(p[i])}' for i, (name, index, _) in enumerate(files)]
    p = probabilities(model, test[0][:NUM_IDX])
    lines += [f'idx {i} {int(test[1][i])} {predicted(p[i])}' for i in range(NUM_IDX)]
    with open(os.path.join(a.out, 'expected.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'{a.out}: {len(files)} images, expected.txt with {len(lines)} lines')


if __name__ == '__main__':
    main()
