"""make_folder_corpus.py — writes the seed corpus of tests/fuzz/fuzz_folder.c into
tests/fuzz/corpus/folder: each input a list of records (class byte, 2-byte little-endian
length, file bytes), valid folders of small PNG and JPEG images in grey and colour, and broken
ones (mixed sizes, a truncated PNG, a PGM, an empty file, no records at all).
Usage: python3 tests/fuzz/make_folder_corpus.py (from the project folder; needs PIL)"""
import io
import os
import struct

from PIL import Image

OUT = 'tests/fuzz/corpus/folder'


def image(mode, size, fmt, seed):
    img = Image.new(mode, size)
    img.putdata([tuple((seed * 31 + i * k) % 256 for k in (7, 11, 13))[:len(mode)]
                 if len(mode) > 1 else (seed * 31 + i * 7) % 256
                 for i in range(size[0] * size[1])])
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


def records(*items):
    return b''.join(struct.pack('<BH', c, len(b)) + b for c, b in items)


rgb = [image('RGB', (4, 3), 'PNG', s) for s in range(3)]
grey = image('L', (4, 3), 'PNG', 5)
jpeg_rgb = image('RGB', (4, 3), 'JPEG', 6)
jpeg_grey = image('L', (4, 3), 'JPEG', 7)
inputs = {
    'colour-png': records((0, rgb[0]), (1, rgb[1]), (1, rgb[2])),
    'grey-first': records((0, grey), (1, rgb[0]), (2, jpeg_rgb)),
    'jpeg-mixed': records((2, jpeg_grey), (3, jpeg_rgb), (0, rgb[1])),
    'mixed-sizes': records((0, rgb[0]), (1, image('RGB', (3, 4), 'PNG', 1))),
    'truncated-png': records((0, rgb[0]), (1, rgb[1][:40])),
    'pgm': records((0, b'P5 4 3 255\n' + bytes(range(12)))),
    'empty-file': records((0, rgb[0]), (1, b'')),
    'no-records': b'',
}
os.makedirs(OUT, exist_ok=True)
for name, data in inputs.items():
    with open(f'{OUT}/{name}', 'wb') as f:
        f.write(data)
