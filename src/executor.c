/* executor.c — plans and runs the layers of a model over one batch (see executor.h). The
 * gradient of every parameter is summed over samples in sample order, and the chunk sizes
 * depend only on the model and the batch size, so results never depend on threads. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "executor.h"
#include "gemm.h"
#include "layers.h"

/* Transient floats per segment pass: small enough to stay in a core's L2 cache. */
#define CN_CHUNK_FLOATS 32768

/* ------------------------------------------------------------------ planning */

static int kind_at(const cn_model *m, int i)
{
    return i < m->num_layers ? (int)m->layers[i].kind : -1;
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

static void plan_segments(cn_plan *p)
{
    const cn_model *m = p->m;
    p->num_segments = 0;
    for (int i = 0; i < m->num_layers;) {
        cn_segment *s = &p->segments[p->num_segments++];
        s->first = i;
        s->batch_op = m->layers[i].kind == CN_BATCHNORM2D;
        if (!s->batch_op)
            while (i + 1 < m->num_layers && m->layers[i + 1].kind != CN_BATCHNORM2D) i++;
        s->last = i++;
        s->chunk = s->batch_op ? p->batch : segment_chunk(p, s->first, s->last);
        for (int l = s->first; l <= s->last; l++) p->rows[l] = s->chunk;
    }
}

/* The patch scratch of the largest convolution, plus what im2row may write past its end. */
static size_t col_floats(const cn_model *m)
{
    size_t most = 1;
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        size_t n = (size_t)l->in_c * l->kernel * l->kernel * l->out_h * l->out_w;
        if (l->kind == CN_CONV2D && n > most) most = n;
    }
    return most + CN_IM2ROW_SLACK;
}

int cn_plan_init(cn_plan *p, const cn_model *m, int batch)
{
    *p = (cn_plan){.m = m, .batch = batch, .col_floats = col_floats(m)};
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

/* Walks the buffers in one fixed order; with base NULL it only counts floats. */
static size_t carve(const cn_plan *p, cn_workspace *w, float *base)
{
    const cn_model *m = p->m;
    size_t at = 0;
#define TAKE(n) (at += (n), base ? base + at - (n) : NULL)
    w->input = TAKE((size_t)p->batch * cn_model_input_size(m));
    w->bn_mean = TAKE((size_t)p->bn_channels);
    w->bn_invstd = TAKE((size_t)p->bn_channels);
    w->bn_var = TAKE((size_t)p->bn_channels);
    w->col = TAKE(p->col_floats);
    w->dparams = TAKE(m->num_params);
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
    return at;
}

int cn_workspace_init(cn_workspace *w, const cn_plan *p)
{
    size_t L = (size_t)p->m->num_layers;
    *w = (cn_workspace){0};
    w->out = calloc(L, sizeof *w->out);
    w->grad = calloc(L, sizeof *w->grad);
    w->argmax = calloc(L, sizeof *w->argmax);
    w->labels = calloc((size_t)p->batch, 1);
    w->layer_forward = calloc(L, sizeof *w->layer_forward);
    w->layer_backward = calloc(L, sizeof *w->layer_backward);
    if (w->out && w->grad && w->argmax)
        w->block = calloc(carve(p, w, NULL), sizeof(float));
    if (!w->block || !w->labels || !w->layer_forward || !w->layer_backward) {
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
    free(w->labels);
    free(w->layer_forward);
    free(w->layer_backward);
    free(w->block);
    *w = (cn_workspace){0};
}

/* ------------------------------------------------------------------ running */

/* Where layer i's tensors for samples first.. are: kept buffers are indexed by sample,
 * transient ones restart at 0 for every pass. */
typedef struct {
    const float *x;
    float *y, *dx, *dy;
    int32_t *argmax;
} layer_io;

static layer_io io_at(const cn_plan *p, const cn_workspace *w, int i, int first)
{
    const cn_layer *l = &p->m->layers[i];
    size_t in = (size_t)cn_layer_in_size(l), out = (size_t)cn_layer_out_size(l);
    size_t at_out = p->keep_out[i] ? (size_t)first : 0;
    size_t at_grad = p->keep_grad[i] ? (size_t)first : 0;
    layer_io io = {0};
    if (i == 0)
        io.x = w->input + (size_t)first * in;
    else {
        io.x = w->out[i - 1] + (p->keep_out[i - 1] ? (size_t)first : 0) * in;
        io.dx = w->grad[i - 1] + (p->keep_grad[i - 1] ? (size_t)first : 0) * in;
    }
    io.y = w->out[i] + at_out * out;
    io.dy = w->grad[i] + at_grad * out;
    io.argmax = w->argmax[i] ? w->argmax[i] + (size_t)first * out : NULL;
    return io;
}

static void layer_forward(const cn_plan *p, cn_workspace *w, int i, int first, int n, int training)
{
    const cn_model *m = p->m;
    const cn_layer *l = &m->layers[i];
    const float *prm = m->params;
    layer_io io = io_at(p, w, i, first);
    int HW = l->out_h * l->out_w, bc = l->bn_channels;
    switch (l->kind) {
    case CN_CONV2D:
        cn_conv2d_forward(io.y, io.x, prm + l->weight, prm + l->bias, n, l->in_c, l->in_h,
                          l->in_w, l->out_c, l->kernel, w->col);
        break;
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

static void layer_backward(const cn_plan *p, cn_workspace *w, int i, int first, int n)
{
    const cn_model *m = p->m;
    const cn_layer *l = &m->layers[i];
    const float *prm = m->params;
    float *dp = w->dparams;
    layer_io io = io_at(p, w, i, first);
    int HW = l->out_h * l->out_w, bc = l->bn_channels;
    switch (l->kind) {
    case CN_CONV2D:
        cn_conv2d_backward(io.dx, dp + l->weight, dp + l->bias, io.dy, io.x, prm + l->weight, n,
                           l->in_c, l->in_h, l->in_w, l->out_c, l->kernel, w->col);
        break;
    case CN_LINEAR:
        cn_linear_backward(io.dx, dp + l->weight, dp + l->bias, io.dy, io.x, prm + l->weight, n,
                           l->in_c, l->out_c);
        break;
    case CN_BATCHNORM2D:
        cn_batchnorm2d_backward(io.dx, dp + l->weight, dp + l->bias, io.dy, io.x, w->bn_mean + bc,
                                w->bn_invstd + bc, prm + l->weight, n, l->out_c, HW);
        break;
    case CN_MAXPOOL2D:
        if (io.dx)
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

void cn_forward(const cn_plan *p, cn_workspace *w, int count, int training)
{
    double mark = training ? cn_seconds() : 0;
    for (int s = 0; s < p->num_segments; s++) {
        const cn_segment *seg = &p->segments[s];
        for (int first = 0; first < count; first += seg->chunk) {
            int n = count - first < seg->chunk ? count - first : seg->chunk;
            for (int i = seg->first; i <= seg->last; i++) {
                layer_forward(p, w, i, first, n, training);
                clock_layer(&w->layer_forward[i], &mark, training);
            }
        }
    }
}

void cn_backward(const cn_plan *p, cn_workspace *w)
{
    const cn_model *m = p->m;
    int last = m->num_layers - 1, B = p->batch;
    memset(w->dparams, 0, m->num_params * sizeof *w->dparams);
    cn_nll_backward(w->grad[last], w->labels, B, m->layers[last].out_c);
    double mark = cn_seconds();
    for (int s = p->num_segments - 1; s >= 0; s--) {
        const cn_segment *seg = &p->segments[s];
        for (int first = 0; first < B; first += seg->chunk) {
            int n = B - first < seg->chunk ? B - first : seg->chunk;
            for (int i = seg->last; i >= seg->first; i--) {
                layer_backward(p, w, i, first, n);
                clock_layer(&w->layer_backward[i], &mark, 1);
            }
        }
    }
}
