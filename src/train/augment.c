/* augment.c — training-time data augmentation: torchvision's RandomCrop(size, padding=P) with
 * zeros on the raw pixels, then RandomHorizontalFlip(). Each sample's draw is made from its own
 * generator, seeded by a counter-based hash (mix.h) of (seed, epoch, sample) that starts from
 * another constant than dropout's streams, so the draws of a sample do not depend on which
 * thread or process loads it, nor on what other samples drew; the settings' text ("crop=2,hflip",
 * "none") for the command line and checkpoints. It does not decide when to augment (the trainer
 * does, for training steps only) and does not normalise. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "mix.h"

/* Where augmentation's hashes start (the fractional part of sqrt(2)); dropout's start from
 * CN_MIX_GOLDEN, so for one seed the two never share a stream. */
#define AUGMENT_DOMAIN 0x6a09e667f3bcc908u

/* ---------------------------------------------------------------- settings */

int cn_augment_check(const cn_augment *a, int height, int width, cn_error *err)
{
    if (a->hflip != 0 && a->hflip != 1)
        return cn_fail(err, "hflip is 0 or 1, not %d", a->hflip);
    int most = (height < width ? height : width) - 1;
    if (most > CN_AUGMENT_MAX_PADDING) most = CN_AUGMENT_MAX_PADDING;
    if (a->crop_padding < 0 || a->crop_padding > most)
        return cn_fail(err, "crop padding %d is out of range for %dx%d images (0..%d)",
                       a->crop_padding, height, width, most < 0 ? 0 : most);
    return 0;
}

void cn_augment_format(const cn_augment *a, char text[CN_AUGMENT_TEXT_MAX])
{
    const char *flip = a->hflip ? "hflip" : "";
    if (a->crop_padding > 0)
        snprintf(text, CN_AUGMENT_TEXT_MAX, "crop=%d%s%s", a->crop_padding, *flip ? "," : "",
                 flip);
    else
        snprintf(text, CN_AUGMENT_TEXT_MAX, "%s", *flip ? flip : "none");
}

/* P of "crop=P" from the len bytes at digits; -1 unless they are 1..4 decimal digits of a
 * number up to CN_AUGMENT_MAX_PADDING. */
static int padding_of(const char *digits, size_t len)
{
    if (len < 1 || len > 4 || strspn(digits, "0123456789") < len) return -1;
    int p = 0;
    for (size_t i = 0; i < len; i++) p = 10 * p + (digits[i] - '0');
    return p <= CN_AUGMENT_MAX_PADDING ? p : -1;
}

/* One item of text (len bytes at item) into *got; *seen has bit 1 for a crop, 2 for a flip. */
static int parse_item(const char *text, const char *item, size_t len, cn_augment *got,
                      unsigned *seen, cn_error *err)
{
    int shown = len > 40 ? 40 : (int)len;
    unsigned bit = len == 5 && memcmp(item, "hflip", 5) == 0 ? 2u
                   : len >= 5 && memcmp(item, "crop=", 5) == 0 ? 1u : 0u;
    if (len == 0)
        return cn_fail(err, "'%.60s': an empty item (give crop=P and/or hflip, or none)", text);
    if (bit == 0)
        return cn_fail(err, "'%.60s': unknown item '%.*s' (the items are crop=P and hflip%s)",
                       text, shown, item, len == 4 && memcmp(item, "none", 4) == 0
                                              ? "; none stands alone" : ", or none");
    if (*seen & bit)
        return cn_fail(err, "'%.60s': %s is given twice", text, bit == 1 ? "crop" : "hflip");
    *seen |= bit;
    if (bit == 2) {
        got->hflip = 1;
        return 0;
    }
    got->crop_padding = padding_of(item + 5, len - 5);
    if (got->crop_padding < 0)
        return cn_fail(err, "'%.60s': P of crop=P must be an integer in 0..%d", text,
                       CN_AUGMENT_MAX_PADDING);
    return 0;
}

int cn_augment_parse(const char *text, cn_augment *a, cn_error *err)
{
    cn_augment got = {0, 0};
    unsigned seen = 0;
    if (strcmp(text, "none") == 0) {
        *a = got;
        return 0;
    }
    for (const char *item = text;; item++) {
        size_t len = strcspn(item, ",");
        if (parse_item(text, item, len, &got, &seen, err)) {
            cn_keep_one_line(err);
            return -1;
        }
        item += len;
        if (*item == '\0') break;
    }
    *a = got;
    return 0;
}

/* ---------------------------------------------------------------- draws */

/* The seed of a sample's generator: a hash of (seed, epoch, sample) in augmentation's domain. */
static uint64_t sample_key(uint64_t seed, int epoch, uint32_t sample)
{
    uint64_t h = cn_mix(seed + AUGMENT_DOMAIN);
    h = cn_mix_in(h, (uint32_t)epoch);
    return cn_mix_in(h, sample);
}

/* The flip comes first, whatever P, then the corner as torchvision draws it: the row, then the
 * column, each uniform in 0..2P (cn_rng_below is unbiased). */
cn_augment_draw cn_augment_draw_sample(const cn_augment *a, uint64_t seed, int epoch,
                                       uint32_t sample)
{
    cn_rng rng;
    cn_rng_seed(&rng, sample_key(seed, epoch, sample));
    int flip = (int)(cn_rng_next(&rng) >> 63);
    cn_augment_draw d = {a->crop_padding, a->crop_padding, a->hflip ? flip : 0};
    if (a->crop_padding > 0) {
        uint32_t span = 2u * (uint32_t)a->crop_padding + 1u;
        d.top = (int)cn_rng_below(&rng, span);
        d.left = (int)cn_rng_below(&rng, span);
    }
    return d;
}

/* ---------------------------------------------------------------- images */

/* out[x] = src[x + dx], or src[W - 1 - x + dx] when mirrored, where that lies inside the row;
 * 0 elsewhere (the padding). */
static void shifted_row(uint8_t *restrict out, const uint8_t *restrict src, int W, int dx,
                        int flip)
{
    int lo = flip ? dx : -dx, hi = flip ? W + dx : W - dx; /* [lo, hi): inside the row */
    if (lo < 0) lo = 0;
    if (lo > W) lo = W;
    if (hi > W) hi = W;
    if (hi < lo) hi = lo;
    memset(out, 0, (size_t)lo);
    if (flip)
        for (int x = lo; x < hi; x++) out[x] = src[W - 1 - x + dx];
    else
        memcpy(out + lo, src + lo + dx, (size_t)(hi - lo));
    memset(out + hi, 0, (size_t)(W - hi));
}

void cn_augment_image(const cn_augment *a, const cn_augment_draw *d, const uint8_t *in,
                      uint8_t *out, int channels, int height, int width)
{
    int dy = d->top - a->crop_padding, dx = d->left - a->crop_padding;
    for (int c = 0; c < channels; c++) {
        const uint8_t *plane = in + (size_t)c * height * width;
        for (int y = 0; y < height; y++) {
            uint8_t *row = out + ((size_t)c * height + y) * width;
            if (y + dy < 0 || y + dy >= height)
                memset(row, 0, (size_t)width);
            else
                shifted_row(row, plane + (size_t)(y + dy) * width, width, dx, d->flip);
        }
    }
}
