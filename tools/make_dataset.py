"""make_dataset.py — writes small image-classification datasets with learnable patterns in the
three layouts cnnc reads (docs/testing.md, "Made-up datasets"): idx (the MNIST family),
cifar10 (CIFAR-10's binary batches) and folder (ImageFolder: PNG, JPEG or both).

Each class is a shape (7 kinds) filled and surrounded by stripes (5 orientations, 3
frequencies), coloured by one of 4 hues in colour data; class c takes shape c mod 7,
orientation c mod 5, frequency c mod 3 and hue c mod 4, so any two of the first three classes
differ in every one of them, and 105 grey or 420 colour classes are all distinct. Every sample
moves, grows, shrinks and turns its pattern a little, has its own brightness, contrast and pixel
noise, and has its mean brightness drawn from one range for all classes, so the brightness alone
tells the classes apart no better than chance. Classes are balanced and the order shuffled.
The same arguments and seed give the same bytes (numpy's Generator, gzip without a time stamp,
JPEG at a fixed quality).

Run with Debian's interpreter (python3-numpy, python3-pil):
  /usr/bin/python3 tools/make_dataset.py --format idx --out /tmp/shapes

Deliberately not here: any reading of datasets, any training, and accuracy promises: the tests
that train on these files state what they require.
"""
import argparse
import gzip
import os
import sys

import numpy as np

SHAPES = ("disk", "square", "triangle", "diamond", "cross", "ring", "bar")
ANGLES = (0, 36, 72, 108, 144)
FREQS = ("wide", "mid", "fine")
HUES = ("red", "yellow", "cyan", "violet")
HUE_DEGREES = (0, 80, 180, 275)
MAX_CLASSES = 100
MAX_SIDE = 1024
MAX_SAMPLES = 1000000
CHUNK_PIXELS = 1 << 21    # pixels a chunk of samples renders at once (memory)


class UsageError(Exception):
    """A wrong flag or combination of flags: exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit status 2."""

    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    p = Parser(
        prog="make_dataset.py",
        description="Writes a small image-classification dataset whose classes are distinct "
        "visual patterns (shape, stripe orientation and frequency, hue) with per-sample "
        "jitter and noise and equal mean brightness, in cnnc's idx, cifar10 or folder layout. "
        "The same arguments give byte-identical files.")
    p.add_argument("--format", required=True, choices=("idx", "cifar10", "folder"),
                   help="idx: train-/t10k- images and labels (grey); cifar10: data_batch_1..5.bin, "
                   "test_batch.bin and batches.meta.txt (32x32 colour); folder: "
                   "DIR/train/CLASS/NNNNN.png and DIR/test/CLASS/...")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (made if missing)")
    p.add_argument("--train", type=int, default=2000, metavar="N",
                   help="training samples (default 2000)")
    p.add_argument("--test", type=int, default=500, metavar="N", help="test samples (default 500)")
    p.add_argument("--classes", type=int, metavar="K",
                   help=f"number of classes, 2..{MAX_CLASSES} (default 10; 3 for folder)")
    p.add_argument("--channels", type=int, choices=(1, 3),
                   help="1 grey or 3 colour (idx: 1 only; cifar10: 3 only; folder default 3)")
    p.add_argument("--height", type=int, metavar="H",
                   help="image height, at least 8 (default 28 for idx, 32 otherwise; cifar10: 32)")
    p.add_argument("--width", type=int, metavar="W",
                   help="image width, at least 8 (default 28 for idx, 32 otherwise; cifar10: 32)")
    p.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default 1)")
    p.add_argument("--gzip", action="store_true", help="idx: write the four files as .gz")
    p.add_argument("--image-format", choices=("png", "jpeg", "mixed"),
                   help="folder: png (default), jpeg (quality 90), or mixed (alternating)")
    p.add_argument("--names", action="store_true",
                   help="idx: also write DIR/classes.txt, one class name a line (cifar10 always "
                   "writes batches.meta.txt; folder names are the class folders)")
    return settle(p.parse_args(argv))


def settle(a):
    """Fills in each format's defaults and refuses what the format cannot hold."""
    fmt = a.format
    if a.classes is None:
        a.classes = 3 if fmt == "folder" else 10
    if a.channels is None:
        a.channels = 1 if fmt == "idx" else 3
    side = 28 if fmt == "idx" else 32
    a.height = side if a.height is None else a.height
    a.width = side if a.width is None else a.width
    if not 2 <= a.classes <= MAX_CLASSES:
        raise UsageError(f"--classes {a.classes}: must be 2..{MAX_CLASSES}")
    for flag, value in (("--height", a.height), ("--width", a.width)):
        if not 8 <= value <= MAX_SIDE:
            raise UsageError(f"{flag} {value}: must be 8..{MAX_SIDE}")
    least = {"--train": max(a.classes, 5 if fmt == "cifar10" else 0), "--test": a.classes}
    for flag, value in (("--train", a.train), ("--test", a.test)):
        if not least[flag] <= value <= MAX_SAMPLES:
            raise UsageError(f"{flag} {value}: must be {least[flag]}..{MAX_SAMPLES} "
                             "(a sample of each class, and one for each cifar10 batch)")
    if a.seed < 0:
        raise UsageError(f"--seed {a.seed}: must be 0 or more")
    if fmt == "idx" and a.channels != 1:
        raise UsageError("--channels 3: idx holds grey images only")
    if fmt == "cifar10" and (a.channels, a.height, a.width) != (3, 32, 32):
        raise UsageError("cifar10 holds 32x32 colour images only (--channels 3, 32x32)")
    if a.gzip and fmt != "idx":
        raise UsageError("--gzip: only for --format idx")
    if a.image_format is not None and fmt != "folder":
        raise UsageError("--image-format: only for --format folder")
    if a.image_format is None:
        a.image_format = "png"
    return a


# ---------------------------------------------------------------- the patterns

def class_name(c, colour):
    """Class c's pattern as words, e.g. disk-0deg-wide-red."""
    name = f"{SHAPES[c % 7]}-{ANGLES[c % 5]}deg-{FREQS[c % 3]}"
    return f"{name}-{HUES[c % 4]}" if colour else name


def hue_colours():
    """The 4 hues as RGB rows, each scaled to a mean of 1 over its channels (no hue is
    brighter than another)."""
    rows = []
    for deg in HUE_DEGREES:
        k = (np.array([5.0, 3.0, 1.0]) + deg / 60.0) % 6
        rgb = 1.0 - 0.8 * np.clip(np.minimum(k, 4 - k), 0, 1)
        rows.append(rgb / rgb.mean())
    return np.array(rows)


def shape_masks(shape, x, y):
    """Soft-edged mask in [0, 1] of each sample's shape on coordinates where the shape's
    radius is 1 (x right, y down); shape is one index per sample."""
    r = np.sqrt(x * x + y * y)
    a, b = np.abs(x), np.abs(y)
    dist = np.stack([
        r - 1.0,                                           # disk
        np.maximum(a, b) - 0.85,                           # square
        np.maximum(y - 0.6, (1.7 * a - y) / 2.0 - 0.5),    # triangle, pointing up
        (a + b) / 1.2 - 1.0,                               # diamond
        np.minimum(np.maximum(a - 0.35, b - 1.0),          # cross
                   np.maximum(b - 0.35, a - 1.0)),
        np.abs(r - 0.78) - 0.25,                           # ring
        np.maximum(a - 1.05, b - 0.4),                     # bar
    ])
    chosen = np.take_along_axis(dist, shape[None, :, None, None], axis=0)[0]
    return np.clip(0.5 - chosen * 6.0, 0.0, 1.0)


def draw_params(rng, labels, height, width):
    """Each sample's jitter, drawn for all samples at once (the draws do not depend on how
    the rendering is cut into chunks)."""
    n = len(labels)
    cycles = np.array([1.5, 2.5, 3.5]) * min(1.0, min(height, width) / 16.0)
    return {
        "shape": labels % 7,
        "angle": np.radians(np.array(ANGLES)[labels % 5] + rng.uniform(-12, 12, n)),
        "freq": cycles[labels % 3] * rng.uniform(0.9, 1.1, n),
        "hue": labels % 4,
        "cx": rng.uniform(-0.3, 0.3, n),
        "cy": rng.uniform(-0.3, 0.3, n),
        "scale": rng.uniform(0.35, 0.7, n),
        "stripes": rng.uniform(0.25, 0.45, n),
        "bright": rng.uniform(0.35, 0.65, n),
        "contrast": rng.uniform(0.3, 0.8, n),
    }


def render(p, rng, lo, hi, height, width, channels, hues):
    """Samples lo..hi-1 as uint8, shape (n, channels, height, width)."""
    s = slice(lo, hi)
    aspect = width / height
    ys = np.linspace(-1, 1, height)[None, :, None]
    xs = np.linspace(-aspect, aspect, width)[None, None, :]
    x = xs - p["cx"][s, None, None] * aspect
    y = ys - p["cy"][s, None, None]
    ang = p["angle"][s, None, None]
    along = x * np.cos(ang) + y * np.sin(ang)
    stripes = np.cos(2 * np.pi * p["freq"][s, None, None] * along / 2.0)
    scale = p["scale"][s, None, None]
    mask = shape_masks(p["shape"][s], x / scale, y / scale)
    shape = mask * (1.0 + 0.4 * stripes)
    back = p["stripes"][s, None, None] * stripes
    if channels == 3:
        tint = hues[p["hue"][s]][:, :, None, None]
        img = shape[:, None] * tint + back[:, None]
    else:
        img = (shape + back)[:, None]
    img = img - img.mean(axis=(1, 2, 3), keepdims=True)
    img = img / (img.std(axis=(1, 2, 3), keepdims=True) + 1e-6)
    img = p["bright"][s, None, None, None] + 0.25 * p["contrast"][s, None, None, None] * img
    img = img + rng.normal(0.0, 0.18, img.shape)
    return np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)


def make_split(rng, n, k, height, width, channels):
    """n balanced, shuffled samples: (images uint8 (n, C, H, W), labels uint8 (n,))."""
    labels = rng.permutation(np.arange(n) % k)
    p = draw_params(rng, labels, height, width)
    hues = hue_colours()
    images = np.empty((n, channels, height, width), np.uint8)
    chunk = max(1, CHUNK_PIXELS // (height * width))
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        images[lo:hi] = render(p, rng, lo, hi, height, width, channels, hues)
    return images, labels.astype(np.uint8)


# ---------------------------------------------------------------- the layouts

def write_file(path, data):
    """Writes data whole or not at all (a temporary file renamed into place)."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def idx_bytes(array, magic):
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


def write_idx(a, splits, names):
    for prefix, (images, labels) in zip(("train", "t10k"), splits):
        for kind, data in (("images-idx3-ubyte", idx_bytes(images[:, 0], 0x803)),
                           ("labels-idx1-ubyte", idx_bytes(labels, 0x801))):
            path = os.path.join(a.out, f"{prefix}-{kind}")
            if a.gzip:
                write_file(path + ".gz", gzip.compress(data, compresslevel=6, mtime=0))
            else:
                write_file(path, data)
    if a.names:
        write_file(os.path.join(a.out, "classes.txt"), "".join(n + "\n" for n in names).encode())


def cifar_bytes(images, labels):
    records = np.concatenate([labels[:, None], images.reshape(len(labels), -1)], axis=1)
    return records.tobytes()


def write_cifar10(a, splits, names):
    (train_x, train_y), (test_x, test_y) = splits
    parts = np.array_split(np.arange(len(train_y)), 5)
    for i, part in enumerate(parts, start=1):
        write_file(os.path.join(a.out, f"data_batch_{i}.bin"),
                   cifar_bytes(train_x[part], train_y[part]))
    write_file(os.path.join(a.out, "test_batch.bin"), cifar_bytes(test_x, test_y))
    write_file(os.path.join(a.out, "batches.meta.txt"), ("\n".join(names) + "\n\n").encode())


def write_folder(a, splits, names):
    from PIL import Image

    width = max(2, len(str(a.classes - 1)))
    folders = [f"{c:0{width}d}-{n}" for c, n in enumerate(names)]
    for split, (images, labels) in zip(("train", "test"), splits):
        digits = max(5, len(str(len(labels) - 1)))
        for folder in folders:
            os.makedirs(os.path.join(a.out, split, folder), exist_ok=True)
        for i, (image, label) in enumerate(zip(images, labels)):
            jpeg = a.image_format == "jpeg" or (a.image_format == "mixed" and i % 2 == 1)
            pixels = image[0] if a.channels == 1 else image.transpose(1, 2, 0)
            mode = "L" if a.channels == 1 else "RGB"
            picture = Image.fromarray(np.ascontiguousarray(pixels), mode)
            name = f"{i:0{digits}d}." + ("jpg" if jpeg else "png")
            path = os.path.join(a.out, split, folders[label], name)
            if jpeg:
                picture.save(path, "JPEG", quality=90, optimize=False, subsampling=0)
            else:
                picture.save(path, "PNG", optimize=False, compress_level=6)


def main(argv):
    try:
        a = parse_args(argv)
    except UsageError as e:
        print(f"make_dataset.py: error: {e} (see --help)", file=sys.stderr)
        return 2
    rng = np.random.default_rng(a.seed)
    shape = (a.classes, a.height, a.width, a.channels)
    splits = [make_split(rng, n, *shape) for n in (a.train, a.test)]
    names = [class_name(c, a.channels == 3) for c in range(a.classes)]
    writer = {"idx": write_idx, "cifar10": write_cifar10, "folder": write_folder}[a.format]
    try:
        os.makedirs(a.out, exist_ok=True)
        writer(a, splits, names)
    except OSError as e:
        print(f"make_dataset.py: error: {e.filename or a.out}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
