/* executor.c — plans and runs the layers of a model over one batch (see executor.h). The
 * gradient of every parameter is summed over the samples of a chunk in sample order, then over
 * the chunks in chunk order, and the chunk sizes depend only on the model and the batch size,
 * so results never depend on threads. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "model/executor.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "layers/layers.h"

/* Transient floats per segment pass: small enough to stay in a core's L2 cache. */
#define CN_CHUNK_FLOATS 32768

/* ------------------------------------------------------------------ planning */

static int kind_at(const cn_model *m, int i)
{
    return i >= 0 && i < m->num_layers ? (int)m->layers[i].kind : -1;
}

/* The layer that reads layer i's output, looking through flatten views (num_layers if none). */
static int consumer_of(const cn_model *m, int i)
{
    int c = i + 1;
    while (c < m->num_layers && m->layers[c].kind == CN_FLATTEN) c++;
    return c;
}

/* Output kept for the whole batch: a BatchNorm reads or writes it, backward reads it (relu and
 * log_softmax use their output, conv and linear their input), or it is the model's output. */
static int output_kept(const cn_model *m, int i)
{
    int k = kind_at(m, i), c = kind_at(m, consumer_of(m, i));
    return k == CN_BATCHNORM2D || k == CN_RELU || k == CN_LOG_SOFTMAX || i == m->num_layers - 1 ||
           c == CN_BATCHNORM2D || c == CN_CONV2D || c == CN_LINEAR;
}

/* Gradient kept for the whole batch: a BatchNorm writes or reads it, or the loss writes it. */
static int grad_kept(const cn_model *m, int i)
{
    return kind_at(m, i) == CN_BATCHNORM2D || kind_at(m, consumer_of(m, i)) == CN_BATCHNORM2D ||
           i == m->num_layers - 1;
}

static void plan_keeping(cn_plan *p)
{
    const cn_model *m = p->m;
    for (int i = 0; i < m->num_layers; i++) {
        int flat_view = m->layers[i].kind == CN_FLATTEN;
        p->keep_out[i] = flat_view ? (i == 0 || p->keep_out[i - 1]) : output_kept(m, i);
        p->keep_grad[i] = flat_view ? (i == 0 || p->keep_grad[i - 1]) : grad_kept(m, i);
    }
}

/* Samples per pass: as many as keep the segment's transient buffers within CN_CHUNK_FLOATS. */
static int segment_chunk(const cn_plan *p, int first, int last)
{
    size_t per_sample = 1;
    for (int i = first; i <= last; i++) {
        size_t size = (size_t)cn_layer_out_size(&p->m->layers[i]);
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
        if (!cn_layer_has_params(l)) continue;
        if (s->param_end == 0) s->param_begin = l->weight;
        s->param_end = l->bias + (size_t)l->out_c;
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
        s->batch_op = m->layers[i].kind == CN_BATCHNORM2D;
        if (!s->batch_op)
            while (i + 1 < m->num_layers && m->layers[i + 1].kind != CN_BATCHNORM2D) i++;
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

static cn_conv_shape conv_shape(const cn_layer *l)
{
    return cn_conv_shape_of(l->in_c, l->in_h, l->in_w, l->out_c, l->kernel, 1, 0);
}

/* The patch scratch of the largest convolution, plus what im2row may write past its end (and,
 * before a max-pool, the picks' scratch). */
static size_t col_floats(const cn_model *m)
{
    size_t most = 1;
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        if (l->kind != CN_CONV2D) continue;
        cn_conv_shape cs = conv_shape(l);
        size_t n = cn_conv2d_col_floats(&cs);
        if (cn_model_pool_after(m, i))
            n = cn_conv2d_pool_col_floats(&cs, cn_model_pool_after(m, i));
        most = n > most ? n : most;
    }
    return most;
}

/* The packed bf16 operands of the largest convolution. */
static size_t packed_words(const cn_model *m)
{
    size_t most = 1;
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        if (l->kind != CN_CONV2D) continue;
        cn_conv_shape cs = conv_shape(l);
        size_t n = cn_conv2d_packed_words(&cs);
        most = n > most ? n : most;
    }
    return most;
}

int cn_plan_init(cn_plan *p, const cn_model *m, int batch, cn_precision precision)
{
    int bf16 = precision == CN_PRECISION_BF16;
    *p = (cn_plan){.m = m, .batch = batch, .col_floats = col_floats(m), .bf16 = bf16,
                   .packed_words = bf16 ? packed_words(m) : 0};
    if (m->num_layers < 1 || batch < 1) return -1;
    size_t L = (size_t)m->num_layers;
    p->segments = calloc(L, sizeof *p->segments);
    p->keep_out = calloc(L, 1);
    p->keep_grad = calloc(L, 1);
    p->rows = calloc(L, sizeof *p->rows);
    if (!p->segments || !p->keep_out || !p->keep_grad || !p->rows) {
        cn_plan_free(p);
        return -1;
    }
    for (int i = 0; i < m->num_layers; i++)
        if (m->layers[i].kind == CN_BATCHNORM2D) p->bn_channels += m->layers[i].out_c;
    plan_keeping(p);
    plan_segments(p);
    return 0;
}

void cn_plan_free(cn_plan *p)
{
    free(p->segments);
    free(p->keep_out);
    free(p->keep_grad);
    free(p->rows);
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
    size_t start = (*at + CN_LINE_FLOATS - 1) / CN_LINE_FLOATS * CN_LINE_FLOATS;
    *at = start + n;
    return base ? base + start : NULL;
}

_Static_assert(sizeof(cn_bf16_pair) == sizeof(float), "packed pairs are carved as floats");

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
    w->labels = (uint8_t *)TAKE(((size_t)p->batch + sizeof(float) - 1) / sizeof(float));
    w->input = TAKE((size_t)p->batch * cn_model_input_size(m));
    w->bn_mean = TAKE((size_t)p->bn_channels);
    w->bn_invstd = TAKE((size_t)p->bn_channels);
    w->bn_var = TAKE((size_t)p->bn_channels);
    w->col = TAKE(p->col_floats);
    w->packed = (cn_bf16_pair *)TAKE(p->packed_words);
    w->dparams = TAKE(m->num_params);
    w->partials = TAKE(p->partial_floats);
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        size_t size = (size_t)cn_layer_out_size(l);
        if (l->kind == CN_FLATTEN) { /* a view of its input */
            w->out[i] = i > 0 ? w->out[i - 1] : w->input;
            w->grad[i] = i > 0 ? w->grad[i - 1] : NULL;
            continue;
        }
        w->out[i] = TAKE(layer_rows(p, i, p->keep_out[i]) * size);
        w->grad[i] = TAKE(layer_rows(p, i, p->keep_grad[i]) * size);
        w->argmax[i] = l->kind == CN_MAXPOOL2D ? (int32_t *)TAKE((size_t)p->batch * size) : NULL;
    }
#undef TAKE
    return (at + CN_LINE_FLOATS - 1) / CN_LINE_FLOATS * CN_LINE_FLOATS;
}

int cn_workspace_init(cn_workspace *w, const cn_plan *p)
{
    size_t L = (size_t)p->m->num_layers;
    *w = (cn_workspace){0};
    w->out = calloc(L, sizeof *w->out);
    w->grad = calloc(L, sizeof *w->grad);
    w->argmax = calloc(L, sizeof *w->argmax);
    if (w->out && w->grad && w->argmax) {
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
    free(w->argmax);
    free(w->block);
    *w = (cn_workspace){0};
}

/* ------------------------------------------------------------------ running */

/* Where layer i's tensors for samples first.. are: kept buffers are w's, indexed by sample;
 * transient ones are the scratch workspace's and restart at 0 for every pass. */
typedef struct {
    const float *x;
    float *y, *dx, *dy;
    int32_t *argmax;
} layer_io;

static layer_io io_at(const cn_plan *p, const cn_workspace *w, const cn_workspace *s, int i,
                      int first)
{
    const cn_layer *l = &p->m->layers[i];
    size_t in = (size_t)cn_layer_in_size(l), out = (size_t)cn_layer_out_size(l);
    size_t at_out = p->keep_out[i] ? (size_t)first : 0;
    size_t at_grad = p->keep_grad[i] ? (size_t)first : 0;
    layer_io io = {0};
    if (i == 0)
        io.x = w->input + (size_t)first * in;
    else {
        int kept_in = p->keep_out[i - 1], kept_din = p->keep_grad[i - 1];
        io.x = (kept_in ? w : s)->out[i - 1] + (kept_in ? (size_t)first : 0) * in;
        if ((kept_din ? w : s)->grad[i - 1])
            io.dx = (kept_din ? w : s)->grad[i - 1] + (kept_din ? (size_t)first : 0) * in;
    }
    io.y = (p->keep_out[i] ? w : s)->out[i] + at_out * out;
    io.dy = (p->keep_grad[i] ? w : s)->grad[i] + at_grad * out;
    io.argmax = w->argmax[i] ? w->argmax[i] + (size_t)first * out : NULL;
    return io;
}

static void layer_forward(const cn_plan *p, cn_workspace *w, cn_workspace *s, int i, int first,
                          int n, int training)
{
    const cn_model *m = p->m;
    const cn_layer *l = &m->layers[i];
    const float *prm = m->params;
    layer_io io = io_at(p, w, s, i, first);
    int HW = l->out_h * l->out_w, bc = l->bn_channels;
    switch (l->kind) {
    case CN_CONV2D: {
        cn_conv_shape cs = conv_shape(l);
        if (p->bf16)
            cn_conv2d_forward_bf16(io.y, io.x, prm + l->weight, prm + l->bias, n, &cs, s->packed);
        else
            cn_conv2d_forward(io.y, io.x, prm + l->weight, prm + l->bias, n, &cs, s->col);
        break;
    }
    case CN_MAXPOOL2D:
        cn_maxpool2d_forward(io.y, io.argmax, io.x, n, l->in_c, l->in_h, l->in_w, l->kernel);
        break;
    case CN_RELU:
        cn_relu_forward(io.y, io.x, (size_t)n * cn_layer_out_size(l));
        break;
    case CN_BATCHNORM2D:
        if (training)
            cn_batchnorm2d_forward_train(io.y, w->bn_mean + bc, w->bn_invstd + bc, w->bn_var + bc,
                                         io.x, prm + l->weight, prm + l->bias, n, l->out_c, HW,
                                         CN_BN_EPS);
        else
            cn_batchnorm2d_forward_eval(io.y, io.x, prm + l->weight, prm + l->bias,
                                        m->stats + l->stats, m->stats + l->stats + l->out_c, n,
                                        l->out_c, HW, CN_BN_EPS);
        break;
    case CN_FLATTEN:
        break;
    case CN_LINEAR:
        cn_linear_forward(io.y, io.x, prm + l->weight, prm + l->bias, n, l->in_c, l->out_c);
        break;
    case CN_LOG_SOFTMAX:
        cn_log_softmax_forward(io.y, io.x, n, l->out_c);
        break;
    }
}

/* dp + l->weight - shift is where this pass adds the gradient of layer i's weight. */
static void layer_backward(const cn_plan *p, cn_workspace *w, cn_workspace *s, int i, int first,
                           int n, float *dp, size_t shift)
{
    const cn_model *m = p->m;
    const cn_layer *l = &m->layers[i];
    const float *prm = m->params;
    layer_io io = io_at(p, w, s, i, first);
    float *dw = dp + (l->weight - shift), *db = dp + (l->bias - shift);
    int HW = l->out_h * l->out_w, bc = l->bn_channels;
    switch (l->kind) {
    case CN_CONV2D: {
        cn_conv_shape cs = conv_shape(l);
        if (cn_model_pool_after(m, i)) { /* gradients from the pool's picks */
            layer_io pool = io_at(p, w, s, i + 1, first);
            cn_conv2d_pool_backward(io.dx, dw, db, pool.dy, pool.argmax, io.x, prm + l->weight,
                                    n, &cs, cn_model_pool_after(m, i), s->col);
        } else if (p->bf16)
            cn_conv2d_backward_bf16(io.dx, dw, db, io.dy, io.x, prm + l->weight, n, &cs, s->col, s->packed);
        else
            cn_conv2d_backward(io.dx, dw, db, io.dy, io.x, prm + l->weight, n, &cs, s->col);
        break;
    }
    case CN_LINEAR:
        cn_linear_backward(io.dx, dw, db, io.dy, io.x, prm + l->weight, n, l->in_c, l->out_c);
        break;
    case CN_BATCHNORM2D:
        cn_batchnorm2d_backward(io.dx, dw, db, io.dy, io.x, w->bn_mean + bc, w->bn_invstd + bc,
                                prm + l->weight, n, l->out_c, HW);
        break;
    case CN_MAXPOOL2D:
        if (io.dx && !cn_model_pool_after(m, i - 1)) /* else the convolution read the picks */
            cn_maxpool2d_backward(io.dx, io.dy, io.argmax, n, l->in_c, l->in_h, l->in_w, l->kernel);
        break;
    case CN_RELU:
        if (io.dx) cn_relu_backward(io.dx, io.dy, io.y, (size_t)n * cn_layer_out_size(l));
        break;
    case CN_LOG_SOFTMAX:
        if (io.dx) cn_log_softmax_backward(io.dx, io.dy, io.y, n, l->out_c);
        break;
    case CN_FLATTEN:
        break;
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
    cn_nll_backward(w->grad[last], w->labels, p->batch, m->layers[last].out_c);
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
