/* dropout.c — PyTorch's nn.Dropout(p): in training each value is zeroed with probability p and
 * the others are multiplied by 1/(1-p), computed once in float as PyTorch does; in evaluation,
 * and whenever p = 0, y is x exactly. Its kernel and its layer table.
 *
 * The mask is not drawn from a generator that runs through the batch: whether element i of
 * sample s (its index in the replica's batch) is kept is a hash of (seed, epoch, step, replica,
 * layer index, s, i) alone — splitmix64's mixing, the top 32 bits compared with p * 2^32, so
 * the fraction dropped is p within 2^-32. Any thread may therefore run any part of the batch
 * and the same values come out.
 *
 * Backward draws the mask again from the same numbers rather than keeping it: that costs one
 * hash per value and no memory, where a kept mask would cost aux bytes for every value of every
 * sample. (Reading y instead would be wrong where a kept x is 0.)
 * Not here: PyTorch's own random stream (its masks cannot be reproduced), in-place operation,
 * and multiply-adds (dropout multiplies only; nothing is counted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/layers.h"
#include "mix.h"

uint64_t cn_dropout_stream(uint64_t seed, int epoch, int step, int replica, int layer)
{
    uint64_t h = cn_mix(seed + CN_MIX_GOLDEN);
    h = cn_mix_in(h, (uint32_t)epoch);
    h = cn_mix_in(h, (uint32_t)step);
    h = cn_mix_in(h, (uint32_t)replica);
    return cn_mix_in(h, (uint32_t)layer);
}

void cn_dropout_apply(float *out, const float *in, int B, size_t N, float p, uint64_t stream,
                      int first)
{
    if (p == 0.0f) {
        if (out != in) memcpy(out, in, (size_t)B * N * sizeof *out);
        return;
    }
    /* dropped when the top 32 bits are below drop (P = drop / 2^32); p < 1 keeps it < 2^32 */
    uint32_t drop = (uint32_t)((double)p * 4294967296.0);
    float scale = 1.0f / (1.0f - p);
    for (int b = 0; b < B; b++) {
        uint64_t sample = cn_mix_in(stream, (uint32_t)(first + b));
        const float *x = in + (size_t)b * N;
        float *y = out + (size_t)b * N;
        for (size_t i = 0; i < N; i++) {
            uint32_t r = (uint32_t)(cn_mix(sample + CN_MIX_GOLDEN * (i + 1)) >> 32);
            y[i] = r >= drop ? x[i] * scale : 0.0f;
        }
    }
}

/* ---------------------------------------------------------------- the layer table */

static int plan(cn_layer *l, const cn_layer_spec *s, cn_error *err)
{
    if (!(s->p >= 0.0f && s->p < 1.0f))
        return cn_fail(err, "p=%g must be at least 0 and less than 1", (double)s->p);
    l->args.p = s->p;
    l->out = l->in;
    return 0;
}

/* out = in * mask * scale in training, a copy otherwise: forward and backward alike. */
static void run(const cn_layer_pass *p, float *out, const float *in)
{
    const cn_layer *l = p->l;
    size_t N = cn_shape_size(l->in);
    float drop = p->training ? l->args.p : 0.0f;
    uint64_t stream = 0;
    if (drop > 0.0f)
        stream = cn_dropout_stream(p->key->seed, p->key->epoch, p->key->step, p->key->replica,
                                   l->index);
    cn_dropout_apply(out, in, p->n, N, drop, stream, p->first);
}

static void forward(const cn_layer_pass *p) { run(p, p->y, p->x); }

static void backward(const cn_layer_pass *p)
{
    if (p->dx) run(p, p->dx, p->dy);
}

/* " p=P" in the shortest of %g and %.9g that reads back as the same float. */
static void describe(const cn_layer *l, char *line, size_t cap)
{
    cn_append_float(line, cap, "p", l->args.p);
}

/* Backward reads neither x nor y: it draws the mask again from the pass's key. */
const cn_layer_type cn_dropout_type = {
    .kind = "dropout",
    .flags = CN_RANDOM,
    .keys = "p",
    .required = "p",
    .plan = plan,
    .forward = forward,
    .backward = backward,
    .describe = describe,
};
