/* executor.c — plans and runs the layers of a model over one batch (see executor.h). The
 * gradient of every parameter is summed over the samples of a chunk in sample order, then over
 * the chunks in chunk order, and the chunk sizes depend only on the model and the batch size,
 * so results never depend on threads. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "model/executor.h"
#include "kernels/gemm.h"
#include "layers/layers.h" /* cn_smoothed_nll_backward, CN_LINE_FLOATS */

/* ------------------------------------------------------------------ planning */

/* Layer i's flags: its type's, those it takes on its shape, and CN_WHOLE_BATCH when it has more
 * parameters than CN_CHUNK_FLOATS or its passes run those of a whole-batch layer after it (a
 * relu before BatchNorm). */
static unsigned flags_of(const cn_model *m, int i)
{
    if (i < 0 || i >= m->num_layers) return 0;
    const cn_layer *l = &m->layers[i];
    unsigned whole = l->num_params > CN_CHUNK_FLOATS ? CN_WHOLE_BATCH : 0;
    int fused = cn_model_fusion(m, i, 0).layers; /* the same count in bf16 (layer.h, fuses) */
    for (int k = 1; k <= fused; k++) whole |= flags_of(m, i + k) & CN_WHOLE_BATCH;
    return l->type->flags | (l->type->shape_flags ? l->type->shape_flags(l) : 0) | whole;
}

/* The layer that reads layer i's output, looking through views (num_layers if none). */
static int consumer_of(const cn_model *m, int i)
{
    int c = i + 1;
    while (c < m->num_layers && (flags_of(m, c) & CN_VIEW)) c++;
    return c;
}

/* Output kept for the whole batch: a whole-batch layer reads or writes it, backward reads it
 * (the layer's own output, or the input of the layer reading it), or it is the model's output. */
static int output_kept(const cn_model *m, int i)
{
    unsigned own = flags_of(m, i), next = flags_of(m, consumer_of(m, i));
    return (own & (CN_WHOLE_BATCH | CN_KEEPS_OUTPUT)) || i == m->num_layers - 1 ||
           (next & (CN_WHOLE_BATCH | CN_KEEPS_INPUT));
}

/* Gradient kept for the whole batch: a whole-batch layer writes or reads it, or the loss
 * writes it. */
static int grad_kept(const cn_model *m, int i)
{
    return ((flags_of(m, i) | flags_of(m, consumer_of(m, i))) & CN_WHOLE_BATCH) ||
           i == m->num_layers - 1;
}

/* The layer whose fused passes run layer i's (cn_fusion), or -1. */
static int fused_head(const cn_plan *p, int i)
{
    for (int h = i - 1; h >= 0; h--)
        if (p->fusion[h].layers >= i - h) return h;
    return -1;
}

/* Whether layer i's pass (CN_FUSE_FORWARD or CN_FUSE_BACKWARD) runs inside an earlier layer's. */
static int run_by_head(const cn_plan *p, int i, unsigned pass)
{
    int h = fused_head(p, i);
    return h >= 0 && (p->fusion[h].passes & pass);
}

/* A layer that runs fused with one before it, when that one runs on the whole batch, is run by
 * it on the whole batch too, in the earlier segment: its buffers must hold every sample. */
static int run_by_whole_batch(const cn_plan *p, int i)
{
    int h = fused_head(p, i);
    return h >= 0 && (flags_of(p->m, h) & CN_WHOLE_BATCH);
}

static void plan_keeping(cn_plan *p)
{
    const cn_model *m = p->m;
    for (int i = 0; i < m->num_layers; i++) p->fusion[i] = cn_model_fusion(m, i, p->bf16);
    for (int i = 0; i < m->num_layers; i++) {
        int view = flags_of(m, i) & CN_VIEW, whole = run_by_whole_batch(p, i);
        p->keep_out[i] = view ? (i == 0 || p->keep_out[i - 1]) : whole || output_kept(m, i);
        p->keep_grad[i] = view ? (i == 0 || p->keep_grad[i - 1]) : whole || grad_kept(m, i);
    }
}

/* Layer i's output and its gradient: nobody reads them when both passes run fused with the
 * layer after it (the fusion's head writes the last fused layer's output and reads that one's
 * gradient). */
static int unread(const cn_plan *p, int i)
{
    const unsigned both = CN_FUSE_FORWARD | CN_FUSE_BACKWARD;
    if (p->fusion[i].passes == both) return 1;
    int h = fused_head(p, i);
    return h >= 0 && p->fusion[h].passes == both && i < h + p->fusion[h].layers;
}

/* Whether layer c's passes can take their input and output gradient made (cn_layer_pass.made_x,
 * made_dy): its type takes them and it fuses with no other layer. (The layers that make them
 * run on the whole batch: every buffer they read is kept for it, so that they make a chunk's
 * samples as well.) */
static int takes_made(const cn_plan *p, int c)
{
    const cn_layer *l = &p->m->layers[c];
    return l->type->takes_made && l->type->takes_made(l, p->bf16) && !p->fusion[c].layers &&
           fused_head(p, c) < 0;
}

/* Whether layer c's passes show what they write (cn_layer_pass.shown_y, shown_dx): its type
 * shows it, it runs on the whole batch (one pass, the samples in order) and fuses with no
 * other layer. */
static int shows(const cn_plan *p, int c)
{
    const cn_layer *l = &p->m->layers[c];
    return l->type->shows && l->type->shows(l, p->bf16) &&
           (flags_of(p->m, c) & CN_WHOLE_BATCH) && !p->fusion[c].layers && fused_head(p, c) < 0;
}

/* h, when layer h's passes (with the layers they run) can do `what` (CN_MAKES_*, CN_TAKES_*)
 * for the layer before or after: it heads its fusion (or has none), runs on the whole batch and
 * its type does it; else -1. */
static int by_sample_layer(const cn_plan *p, int h, unsigned what)
{
    const cn_model *m = p->m;
    if (h < 0 || h >= m->num_layers || fused_head(p, h) >= 0) return -1;
    const cn_layer *l = &m->layers[h];
    cn_fusion f = p->fusion[h];
    if (!l->type->by_sample || !(flags_of(m, h) & CN_WHOLE_BATCH)) return -1;
    if (f.layers && f.passes != (CN_FUSE_FORWARD | CN_FUSE_BACKWARD)) return -1;
    return l->type->by_sample(l, l + 1, f.layers) & what ? h : -1;
}

/* The head of the passes that write layer c's input (through no view), or -1. */
static int input_head(const cn_plan *p, int c)
{
    if (c < 1 || (flags_of(p->m, c - 1) & CN_VIEW)) return -1;
    int h = fused_head(p, c - 1);
    h = h < 0 ? c - 1 : h;
    return h + p->fusion[h].layers == c - 1 ? h : -1;
}

/* The layer right after c that reads its output (through no view), or -1. */
static int output_reader(const cn_plan *p, int c)
{
    int j = c + 1;
    return j < p->m->num_layers && !(flags_of(p->m, j) & CN_VIEW) ? j : -1;
}

/* Which inputs and output gradients are made instead of stored (a layer that takes them, right
 * after, or before, the layers that make them, with no view between), and which outputs and
 * input gradients are shown to the layers that read them as they are written. */
static void plan_made(cn_plan *p)
{
    for (int c = 0; c < p->m->num_layers; c++) {
        p->made_x[c] = p->made_dy[c] = p->shown_y[c] = p->shown_dx[c] = -1;
        int h = input_head(p, c), j = output_reader(p, c);
        if (takes_made(p, c)) {
            p->made_x[c] = by_sample_layer(p, h, CN_MAKES_OUTPUT);
            p->made_dy[c] = by_sample_layer(p, j, CN_MAKES_INPUT_GRADIENT);
        }
        if (shows(p, c)) {
            p->shown_y[c] = by_sample_layer(p, j, CN_TAKES_INPUT);
            p->shown_dx[c] = by_sample_layer(p, h, CN_TAKES_OUTPUT_GRADIENT);
        }
    }
}

/* Whether layer i's take saw its x (forward) or dy (backward) as the layer beside wrote it. */
static int taken_x(const cn_plan *p, int i) { return i > 0 && p->shown_y[i - 1] == i; }
static int taken_dy(const cn_plan *p, int i)
{
    int c = i + p->fusion[i].layers + 1; /* the layer that reads its (fused) output */
    return c < p->m->num_layers && p->shown_dx[c] == i;
}

/* Layer i's output (its gradient) made for the layer that reads it: no buffer holds it. */
static int out_made(const cn_plan *p, int i)
{
    return i + 1 < p->m->num_layers && p->made_x[i + 1] >= 0;
}
static int grad_made(const cn_plan *p, int i) { return p->made_dy[i] >= 0; }

/* Samples per pass: as many as keep the segment's transient buffers within CN_CHUNK_FLOATS. */
static int segment_chunk(const cn_plan *p, int first, int last)
{
    size_t per_sample = 1;
    for (int i = first; i <= last; i++) {
        size_t size = unread(p, i) ? 0 : cn_layer_out_size(&p->m->layers[i]);
        per_sample += (p->keep_out[i] ? 0 : size) + (p->keep_grad[i] ? 0 : size);
    }
    size_t chunk = CN_CHUNK_FLOATS / per_sample;
    return chunk < 1 ? 1 : chunk > (size_t)p->batch ? p->batch : (int)chunk;
}

/* The parameters that layers first..last own: one contiguous range (layers own theirs in order). */
static void segment_params(const cn_model *m, cn_segment *s)
{
    s->param_begin = s->param_end = 0;
    for (int i = s->first; i <= s->last; i++) {
        const cn_layer *l = &m->layers[i];
        if (!l->num_params) continue;
        if (s->param_end == 0) s->param_begin = l->params;
        s->param_end = l->params + l->num_params;
    }
}

static void plan_segments(cn_plan *p)
{
    const cn_model *m = p->m;
    p->num_segments = 0;
    p->partial_floats = 0;
    for (int i = 0; i < m->num_layers;) {
        cn_segment *s = &p->segments[p->num_segments++];
        s->first = i;
        s->batch_op = (flags_of(m, i) & CN_WHOLE_BATCH) != 0;
        if (!s->batch_op)
            while (i + 1 < m->num_layers && !(flags_of(m, i + 1) & CN_WHOLE_BATCH)) i++;
        s->last = i++;
        s->chunk = s->batch_op ? p->batch : segment_chunk(p, s->first, s->last);
        s->num_chunks = (p->batch + s->chunk - 1) / s->chunk;
        segment_params(m, s);
        s->partial = p->partial_floats;
        if (s->num_chunks > 1)
            p->partial_floats += (size_t)s->num_chunks * (s->param_end - s->param_begin);
        for (int l = s->first; l <= s->last; l++) p->rows[l] = s->chunk;
    }
}

/* The scratch of the layer that needs the most: patches (col) and bf16 operands (packed). */
static void plan_scratch(cn_plan *p)
{
    const cn_model *m = p->m;
    p->col_floats = p->packed_words = 1;
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        size_t col = 0, packed = 0;
        if (!l->type->scratch) continue;
        l->type->scratch(l, cn_model_fused_next(m, i, p->bf16), p->bf16, &col, &packed);
        p->col_floats = col > p->col_floats ? col : p->col_floats;
        p->packed_words = packed > p->packed_words ? packed : p->packed_words;
    }
    if (!p->bf16) p->packed_words = 0;
}

int cn_plan_init(cn_plan *p, const cn_model *m, int batch, cn_precision precision)
{
    *p = (cn_plan){.m = m, .batch = batch, .bf16 = precision == CN_PRECISION_BF16};
    if (m->num_layers < 1 || batch < 1) return -1;
    size_t L = (size_t)m->num_layers;
    p->segments = calloc(L, sizeof *p->segments);
    p->keep_out = calloc(L, 1);
    p->keep_grad = calloc(L, 1);
    p->fusion = calloc(L, sizeof *p->fusion);
    p->rows = calloc(L, sizeof *p->rows);
    p->made_x = calloc(L, sizeof *p->made_x);
    p->made_dy = calloc(L, sizeof *p->made_dy);
    p->shown_y = calloc(L, sizeof *p->shown_y);
    p->shown_dx = calloc(L, sizeof *p->shown_dx);
    if (!p->segments || !p->keep_out || !p->keep_grad || !p->fusion || !p->rows || !p->made_x ||
        !p->made_dy || !p->shown_y || !p->shown_dx) {
        cn_plan_free(p);
        return -1;
    }
    plan_keeping(p);
    plan_made(p);
    plan_segments(p);
    plan_scratch(p);
    return 0;
}

void cn_plan_free(cn_plan *p)
{
    free(p->segments);
    free(p->keep_out);
    free(p->keep_grad);
    free(p->fusion);
    free(p->rows);
    free(p->made_x);
    free(p->made_dy);
    free(p->shown_y);
    free(p->shown_dx);
    *p = (cn_plan){0};
}

/* ------------------------------------------------------------------ workspaces */

static size_t layer_rows(const cn_plan *p, int i, int kept)
{
    return kept ? (size_t)p->batch : (size_t)p->rows[i];
}

/* Buffers start on a cache line of their own (CN_LINE_FLOATS floats): whole-vector loads do not
 * straddle two lines. */

/* n floats at the next line boundary from *at; NULL while only counting (base NULL). */
static float *take(float *base, size_t *at, size_t n)
{
    size_t start = cn_whole_lines(*at);
    *at = start + n;
    return base ? base + start : NULL;
}

_Static_assert(sizeof(cn_bf16_pair) == sizeof(float), "packed pairs are carved as floats");

static size_t floats_for_bytes(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

/* Walks the buffers in one fixed order; with base NULL it only counts floats. Everything a
 * pass writes is in this one block, the workspace's own, so two threads running two workspaces
 * never write to the same cache line, timers and labels included. (Moving those into the block
 * and aligning the buffers gave 13% more training samples/s on 2 threads.) */
static size_t carve(const cn_plan *p, cn_workspace *w, float *base)
{
    const cn_model *m = p->m;
    size_t at = 0, L = (size_t)m->num_layers;
#define TAKE(n) take(base, &at, (n))
    w->layer_forward = (double *)TAKE(L * sizeof(double) / sizeof(float));
    w->layer_backward = (double *)TAKE(L * sizeof(double) / sizeof(float));
    w->labels = (uint8_t *)TAKE(floats_for_bytes((size_t)p->batch));
    w->input = TAKE((size_t)p->batch * cn_model_input_size(m));
    w->report = TAKE(m->num_report);
    w->state = TAKE(m->num_state);
    w->col = TAKE(p->col_floats);
    w->packed = (cn_bf16_pair *)TAKE(p->packed_words);
    w->dparams = TAKE(m->num_params);
    w->partials = TAKE(p->partial_floats);
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        size_t size = cn_layer_out_size(l);
        if (flags_of(m, i) & CN_VIEW) { /* its input's buffers */
            w->out[i] = i > 0 ? w->out[i - 1] : w->input;
            w->grad[i] = i > 0 ? w->grad[i - 1] : NULL;
            continue;
        }
        if (!unread(p, i)) {
            w->out[i] = out_made(p, i) ? NULL : TAKE(layer_rows(p, i, p->keep_out[i]) * size);
            w->grad[i] = grad_made(p, i) ? NULL : TAKE(layer_rows(p, i, p->keep_grad[i]) * size);
        }
        size_t aux = l->type->aux_bytes ? l->type->aux_bytes(l) : 0;
        w->aux[i] = aux ? TAKE(floats_for_bytes((size_t)p->batch * aux)) : NULL;
    }
#undef TAKE
    return cn_whole_lines(at);
}

int cn_workspace_init(cn_workspace *w, const cn_plan *p)
{
    size_t L = (size_t)p->m->num_layers;
    *w = (cn_workspace){0};
    w->out = calloc(L, sizeof *w->out);
    w->grad = calloc(L, sizeof *w->grad);
    w->aux = calloc(L, sizeof *w->aux);
    if (w->out && w->grad && w->aux) {
        size_t bytes = carve(p, w, NULL) * sizeof(float);
        if ((w->block = aligned_alloc(CN_LINE_FLOATS * sizeof(float), bytes)))
            memset(w->block, 0, bytes);
    }
    if (!w->block) {
        cn_workspace_free(w);
        return -1;
    }
    carve(p, w, w->block);
    return 0;
}

void cn_workspace_free(cn_workspace *w)
{
    free(w->out);
    free(w->grad);
    free(w->aux);
    free(w->block);
    *w = (cn_workspace){0};
}

/* ------------------------------------------------------------------ running */

/* base + offset, or NULL for a buffer that is not there. */
static float *buffer_at(float *base, size_t offset) { return base ? base + offset : NULL; }

/* Layer i's pass over samples first..first+n-1: kept buffers are w's, indexed by sample;
 * transient ones are the scratch workspace's and restart at 0 for every pass. Buffers nobody
 * reads (unread) are NULL. */
static cn_layer_pass pass_at(const cn_plan *p, cn_workspace *w, cn_workspace *s, int i,
                             int first, int n, int training)
{
    const cn_model *m = p->m;
    const cn_layer *l = &m->layers[i];
    size_t in = cn_layer_in_size(l), out = cn_layer_out_size(l);
    size_t at_out = p->keep_out[i] ? (size_t)first : 0;
    size_t at_grad = p->keep_grad[i] ? (size_t)first : 0;
    cn_layer_pass q = {.l = l, .n = n, .first = first, .training = training, .bf16 = p->bf16,
                       .params = m->params + l->params, .running = m->running + l->running,
                       .report = w->report + l->report, .state = w->state + l->state,
                       .col = s->col, .packed = s->packed, .key = &w->key};
    if (i == 0)
        q.x = w->input + (size_t)first * in;
    else {
        int kept_in = p->keep_out[i - 1], kept_din = p->keep_grad[i - 1];
        q.x = buffer_at((kept_in ? w : s)->out[i - 1], (kept_in ? (size_t)first : 0) * in);
        q.dx = buffer_at((kept_din ? w : s)->grad[i - 1], (kept_din ? (size_t)first : 0) * in);
    }
    q.y = buffer_at((p->keep_out[i] ? w : s)->out[i], at_out * out);
    q.dy = buffer_at((p->keep_grad[i] ? w : s)->grad[i], at_grad * out);
    if (w->aux[i])
        q.aux = (char *)w->aux[i] + (size_t)first * l->type->aux_bytes(l);
    return q;
}

/* The passes of the layers that layer i's fused passes run, into next[0 .. fusion's layers). */
static void fused_passes(const cn_plan *p, cn_workspace *w, cn_workspace *s, int i, int first,
                         int n, int training, cn_layer_pass next[CN_MAX_FUSED])
{
    for (int k = 0; k < p->fusion[i].layers; k++)
        next[k] = pass_at(p, w, s, i + 1 + k, first, n, training);
}

/* The passes of a layer that makes or takes what another reads or writes, a sample at a time
 * (layer.h, by_sample). */
typedef struct {
    cn_layer_pass head, next[CN_MAX_FUSED];
    int count;
} sample_passes;

static void make_output(const void *ctx, int b, float *dst)
{
    const sample_passes *k = ctx;
    k->head.l->type->make_output(&k->head, k->next, k->count, b, dst);
}

static void make_input_gradient(const void *ctx, int b, float *dst)
{
    const sample_passes *k = ctx;
    k->head.l->type->make_input_gradient(&k->head, k->next, k->count, b, dst);
}

static void take_input(const void *ctx, int b, const float *x)
{
    const sample_passes *k = ctx;
    k->head.l->type->take_input(&k->head, k->next, k->count, b, x);
}

static void take_output_gradient(const void *ctx, int b, const float *dy)
{
    const sample_passes *k = ctx;
    k->head.l->type->take_output_gradient(&k->head, k->next, k->count, b, dy);
}

/* Layer h's passes over samples first.. (n of them), into *k. */
static void sample_passes_of(sample_passes *k, const cn_plan *p, cn_workspace *w, cn_workspace *s,
                            int h, int first, int n, int training)
{
    k->head = pass_at(p, w, s, h, first, n, training);
    k->count = p->fusion[h].layers;
    fused_passes(p, w, s, h, first, n, training, k->next);
}

/* The samples first.. (n of them) that layer h makes with make, its passes put in *k. */
static cn_samples made_by(sample_passes *k, const cn_plan *p, cn_workspace *w, cn_workspace *s,
                          int h, int first, int n, int training,
                          void (*make)(const void *, int, float *))
{
    sample_passes_of(k, p, w, s, h, first, n, training);
    return (cn_samples){.make = make, .ctx = k};
}

/* Where a pass shows what it writes to layer h's take, its passes put in *k. */
static cn_taker taken_by(sample_passes *k, const cn_plan *p, cn_workspace *w, cn_workspace *s,
                         int h, int first, int n, void (*fn)(const void *, int, const float *))
{
    sample_passes_of(k, p, w, s, h, first, n, 1);
    return (cn_taker){.take = fn, .ctx = k};
}

static void layer_forward(const cn_plan *p, cn_workspace *w, cn_workspace *s, int i, int first,
                          int n, int training)
{
    if (run_by_head(p, i, CN_FUSE_FORWARD)) return; /* a layer before ran it */
    cn_layer_pass q = pass_at(p, w, s, i, first, n, training), next[CN_MAX_FUSED];
    sample_passes made, taker;
    if (p->made_x[i] >= 0)
        q.made_x = made_by(&made, p, w, s, p->made_x[i], first, n, training, make_output);
    if (training && p->shown_y[i] >= 0)
        q.shown_y = taken_by(&taker, p, w, s, p->shown_y[i], first, n, take_input);
    q.taken = training && taken_x(p, i);
    if (p->fusion[i].passes & CN_FUSE_FORWARD) {
        fused_passes(p, w, s, i, first, n, training, next);
        q.l->type->forward_fused(&q, next, p->fusion[i].layers);
    } else {
        q.l->type->forward(&q);
    }
}

/* dp + l->params - shift is where this pass adds the gradient of layer i's parameters. */
static void layer_backward(const cn_plan *p, cn_workspace *w, cn_workspace *s, int i, int first,
                           int n, float *dp, size_t shift)
{
    const cn_layer_type *type = p->m->layers[i].type;
    if (run_by_head(p, i, CN_FUSE_BACKWARD)) return; /* a layer before runs it */
    cn_layer_pass q = pass_at(p, w, s, i, first, n, 1), next[CN_MAX_FUSED];
    q.dparams = dp + (q.l->params - shift);
    sample_passes made_x, made_dy, taker;
    if (p->made_x[i] >= 0)
        q.made_x = made_by(&made_x, p, w, s, p->made_x[i], first, n, 1, make_output);
    if (p->made_dy[i] >= 0)
        q.made_dy = made_by(&made_dy, p, w, s, p->made_dy[i], first, n, 1, make_input_gradient);
    if (p->shown_dx[i] >= 0)
        q.shown_dx = taken_by(&taker, p, w, s, p->shown_dx[i], first, n, take_output_gradient);
    q.taken = taken_dy(p, i);
    if (p->fusion[i].passes & CN_FUSE_BACKWARD) {
        int count = p->fusion[i].layers;
        fused_passes(p, w, s, i, first, n, 1, next);
        /* their parameters: where any of these layers runs on the whole batch (the layers fused
         * with a whole-batch one do too, flags_of) the segment is one pass straight into
         * dparams; otherwise they are all in the segment */
        for (int k = 0; k < count; k++) next[k].dparams = dp + (next[k].l->params - shift);
        type->backward_fused(&q, next, count);
    } else if (type->backward) {
        type->backward(&q);
    }
}

/* Adds the seconds since *mark to *total and moves the mark (training passes only). */
static void clock_layer(double *total, double *mark, int timed)
{
    if (!timed) return;
    double now = cn_seconds();
    *total += now - *mark;
    *mark = now;
}

int cn_segment_chunks(const cn_plan *p, int seg, int count)
{
    int chunk = p->segments[seg].chunk;
    return (count + chunk - 1) / chunk;
}

void cn_forward_chunk(const cn_plan *p, cn_workspace *w, cn_workspace *scratch, int seg,
                      int chunk, int count, int training)
{
    const cn_segment *sg = &p->segments[seg];
    int first = chunk * sg->chunk, n = count - first < sg->chunk ? count - first : sg->chunk;
    double mark = training ? cn_seconds() : 0;
    for (int i = sg->first; i <= sg->last; i++) {
        layer_forward(p, w, scratch, i, first, n, training);
        clock_layer(&scratch->layer_forward[i], &mark, training);
    }
}

void cn_forward(const cn_plan *p, cn_workspace *w, int count, int training)
{
    for (int s = 0; s < p->num_segments; s++)
        for (int c = 0; c < cn_segment_chunks(p, s, count); c++)
            cn_forward_chunk(p, w, w, s, c, count, training);
}

void cn_backward_start(const cn_plan *p, cn_workspace *w)
{
    const cn_model *m = p->m;
    int last = m->num_layers - 1;
    memset(w->dparams, 0, m->num_params * sizeof *w->dparams);
    memset(w->partials, 0, p->partial_floats * sizeof *w->partials);
    cn_smoothed_nll_backward(w->grad[last], w->labels, p->batch, m->layers[last].out.c,
                             p->label_smoothing);
}

void cn_backward_chunk(const cn_plan *p, cn_workspace *w, cn_workspace *scratch, int seg,
                       int chunk)
{
    const cn_segment *sg = &p->segments[seg];
    int first = chunk * sg->chunk, n = p->batch - first < sg->chunk ? p->batch - first : sg->chunk;
    /* one chunk: straight into dparams, which is what adding its sum to zeros would give */
    float *dp = w->dparams;
    size_t shift = 0;
    if (sg->num_chunks > 1) {
        size_t size = sg->param_end - sg->param_begin;
        dp = w->partials + sg->partial + (size_t)chunk * size;
        shift = sg->param_begin;
    }
    double mark = cn_seconds();
    for (int i = sg->last; i >= sg->first; i--) {
        layer_backward(p, w, scratch, i, first, n, dp, shift);
        clock_layer(&scratch->layer_backward[i], &mark, 1);
    }
}

void cn_backward_segment_done(const cn_plan *p, cn_workspace *w, int seg)
{
    const cn_segment *sg = &p->segments[seg];
    if (sg->num_chunks < 2) return;
    size_t size = sg->param_end - sg->param_begin;
    float *d = w->dparams + sg->param_begin;
    for (int c = 0; c < sg->num_chunks; c++) {
        const float *part = w->partials + sg->partial + (size_t)c * size;
        for (size_t j = 0; j < size; j++) d[j] += part[j];
    }
}

void cn_backward(const cn_plan *p, cn_workspace *w)
{
    cn_backward_start(p, w);
    for (int s = p->num_segments - 1; s >= 0; s--) {
        for (int c = 0; c < p->segments[s].num_chunks; c++) cn_backward_chunk(p, w, w, s, c);
        cn_backward_segment_done(p, w, s);
    }
}
