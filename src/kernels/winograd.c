/* winograd.c — 3x3 convolutions of stride 1 (zero padding 0, 1 or 2) by Winograd's minimal
 * filtering F(4x4, 3x3) (Lavin and Gray, 2016): each 4x4 tile of an output plane from the 6x6
 * block of input around it. With V = B^T d B the transformed input blocks, U = G g G^T the
 * transformed kernels and Y = A^T (U . V) A the output blocks, the products for all tiles of a
 * few samples are matrix products, one for each of the 36 entries xi of a block.
 * - The forward pass: M[xi] = U[xi] [OC, C] * V[xi] [C, tiles] (cn_sgemm), 36 products per
 *   pair of channels for 16 outputs instead of 144 (4 times fewer).
 * - The input gradient: the same, run on the output gradient with the kernels turned by 180
 *   degrees and padding 2 - pad.
 * - The weight gradient: G^T (sum over tiles of (A dY A^T) . V) G, the products dU[xi]^T [C, OC]
 *   += V[xi] [C, tiles] * (A dY A^T)[xi] [tiles, OC], summed in chains (cn_sgemm_chained), 4
 *   times fewer than direct; V as the forward pass makes it, the output gradient transformed
 *   turned round (tiles as rows, from the sample turned round: positions as rows). Its sums of
 *   terms up to 64 times the direct sums', folded back with sixths and 24ths, land further
 *   from exact than those of F(2x2, 3x3) (2.25 times fewer than direct, not 4): 1.1e-6 of the
 *   largest element at worst on the PyTorch fixture (docs/speed.md).
 * The transforms (the input and output ones a plane at a time, the same plane of a few samples
 * at once where a plane has fewer tiles than a line, so that its vectors fill; the output
 * gradient's a sample at a time) are vector kernels of each instruction set (gemm.h,
 * winograd_kernels.inc). Every sum runs in an order fixed by the shapes and the instruction
 * set. Not for other kernel sizes or strides, and not for bf16 (conv.c keeps its patch products
 * for those). */
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/winograd.h"
#include "layers/layers.h"

#define XI4 36         /* the entries of a transformed 6x6 block */
#define BLOCK_TILES 64 /* about this many tiles (whole samples) go through the products at
                        * once: with the outputs stored around the caches, 3-6% faster in
                        * training than 128 (docs/speed.md), though slower on one thread in hot
                        * caches (valid 64 -> 64 on 18 x 18); the weight gradient's too (128:
                        * within the noise, 256: 6-18% slower in training) */
#define MIN_CHANNELS 8  /* fewer channels make products too thin to gain from the transforms */

/* A convolution as the algorithm sees it: the input gradient's is the forward one of another. */
typedef struct {
    int C, IH, IW; /* input planes, zero-padded by pad on every side */
    int OC, pad;
    int OH, OW;
    int xi;        /* the entries of a transformed block (4x4 output tiles, 6x6 blocks) */
    int TH, TW, T; /* output tiles: per column, per row, per sample */
    int weights;   /* 1: the weight gradient's (its scratch differs) */
    int nb;        /* samples per block */
    int group;     /* samples whose planes one input or output transform takes: planes of
                    * fewer tiles than a line share vectors (gemm.h, cn_winograd_plane) */
    int ld;        /* the rows of V and M: nb * T tiles, on whole lines */
    size_t vs, ms; /* from one entry's block of V [C, ld] (of M [OC, ld]) to the next's */
} plan;

/* The floats from one entry's block of n floats to the next's: n on an odd number of cache
 * lines. The transforms write (and read) the blocks side by side; blocks a multiple of 4 KB
 * apart would all fall in the same few cache sets and evict each other. */
static size_t block_stride(size_t n)
{
    size_t lines = cn_whole_lines(n) / CN_LINE_FLOATS;
    return (lines | 1) * CN_LINE_FLOATS;
}

static plan plan_of(int C, int H, int W, int OC, int pad, int tiles)
{
    plan p = {C, H, W, OC, pad, H + 2 * pad - 2, W + 2 * pad - 2, XI4, 0, 0, 0, 0, 0, 0, 0, 0,
              0};
    p.TH = (p.OH + 3) / 4, p.TW = (p.OW + 3) / 4, p.T = p.TH * p.TW;
    p.nb = tiles / p.T > 1 ? tiles / p.T : 1;
    p.group = p.T < CN_LINE_FLOATS ? CN_LINE_FLOATS / p.T : 1;
    p.group = p.group < p.nb ? p.group : p.nb;
    p.ld = (int)cn_whole_lines((size_t)p.nb * p.T);
    p.vs = block_stride((size_t)p.C * p.ld), p.ms = block_stride((size_t)p.OC * p.ld);
    return p;
}

/* The forward pass, and the input gradient. */
static plan forward_plan(const cn_conv_shape *s)
{
    return plan_of(s->C, s->H, s->W, s->OC, s->pad, BLOCK_TILES);
}

static plan input_gradient_plan(const cn_conv_shape *s)
{
    return plan_of(s->OC, s->OH, s->OW, s->C, 2 - s->pad, BLOCK_TILES);
}

/* The weight gradient: the forward pass's tiles and blocks, its own scratch. */
static plan weight_gradient_plan(const cn_conv_shape *s)
{
    plan p = forward_plan(s);
    p.weights = 1;
    return p;
}

int cn_winograd_fits(const cn_conv_shape *s)
{
    return s->K == 3 && s->stride == 1 && s->pad <= 2 && s->OH >= 1 && s->OW >= 1 &&
           s->C >= MIN_CHANNELS && s->OC >= MIN_CHANNELS;
}

/* ---- scratch ---- */

typedef struct {
    float *U;   /* [xi, OC, C]: transformed kernels (the weight gradient's sums in backward) */
    float *V;   /* [xi, C, ld]: transformed input blocks */
    float *M;   /* [xi, OC, ld]: products (transformed output gradients in backward) */
    float *row;  /* the transforms' scratch: rows between their passes */
    float *zero; /* [OC] zeros: where the products' sums start */
    float *made; /* samples made where no buffer holds them (cn_samples): a group of input
                  * samples; the weight gradient's, then a block of output gradients */
    float *shown;  /* the passes': a block's outputs, when shown (cn_taker) on their way */
    float *turned; /* the weight gradient's: an output gradient sample turned round (positions
                    * as rows), inside zeros (cn_winograd4_gradient_rows) */
} parts;

/* The floats of one sample of the plan's input, and of its output. */
static size_t input_floats(const plan *p) { return (size_t)p->C * p->IH * p->IW; }
static size_t output_floats(const plan *p) { return (size_t)p->OC * p->OH * p->OW; }

/* The weight gradient's output gradient sample turned round, inside zeros: 4 TH rows of 4 TW
 * positions of OC channels (cn_winograd4_gradient_rows). */
static size_t turned_floats(const plan *p) { return (size_t)16 * p->TH * p->TW * p->OC; }

/* The shape of the planes for the transforms (gemm.h): count of them, stride floats apart. */
static cn_winograd_plane plane_of(const plan *p, int count, size_t stride)
{
    return (cn_winograd_plane){p->IH, p->IW, p->pad, p->OH, p->OW, p->TH, p->TW, count,
                               (ptrdiff_t)stride, 0};
}

static size_t carve(const plan *p, float *at, parts *out)
{
    size_t u = cn_whole_lines((size_t)p->xi * p->OC * p->C);
    size_t v = (size_t)p->xi * p->vs, m = (size_t)p->xi * p->ms;
    cn_winograd_plane s = plane_of(p, p->group, 0);
    size_t r = cn_whole_lines(cn_winograd4_row_floats(&s));
    size_t z = cn_whole_lines((size_t)p->OC);
    size_t outputs = cn_whole_lines((size_t)p->nb * output_floats(p));
    size_t k = cn_whole_lines((size_t)p->group * input_floats(p)) + (p->weights ? outputs : 0);
    size_t o = p->weights ? cn_whole_lines(turned_floats(p)) : outputs;
    if (out) {
        float *after = at + u + v + m + r + z + k;
        *out = (parts){at, at + u, at + u + v, at + u + v + m, at + u + v + m + r,
                       at + u + v + m + r + z, p->weights ? NULL : after,
                       p->weights ? after : NULL};
    }
    return u + v + m + r + z + k + o;
}

/* The forward pass's parts, or the backward's: the weight gradient's and the input gradient's
 * side by side (they go a block of samples at a time together). */
size_t cn_winograd_floats(const cn_conv_shape *s)
{
    plan f = forward_plan(s), g = input_gradient_plan(s), h = weight_gradient_plan(s);
    size_t a = carve(&f, NULL, NULL), b = carve(&g, NULL, NULL) + carve(&h, NULL, NULL);
    return a > b ? a : b;
}

/* ---- transforms ---- */

/* t = G (a, b, c) for F(4x4, 3x3)'s G, whose rows are (1/4, 0, 0), -(1/6)(1, 1, 1),
 * -(1/6)(1, -1, 1), (1/24, 1/12, 1/6), (1/24, -1/12, 1/6) and (0, 0, 1). */
static void g6(float t[6], float a, float b, float c)
{
    const float sixth = 1.0f / 6.0f, twelfth = 1.0f / 12.0f, twenty_fourth = 1.0f / 24.0f;
    float ac = a + c, p = a * twenty_fourth + c * sixth, q = b * twelfth;
    t[0] = 0.25f * a;
    t[1] = -(ac + b) * sixth, t[2] = -(ac - b) * sixth;
    t[3] = p + q, t[4] = p - q;
    t[5] = c;
}

/* U [36, rows, cols] = G g G^T for each kernel g of w [OC, C, 3, 3]: rows = OC and cols = C,
 * or with turn, rows = C, cols = OC and each g turned by 180 degrees (the input gradient's). The
 * kernels go in runs of KERNEL_RUN entries of U, so that the 36 blocks are each written a run at
 * a time, not a float at a time 36 blocks apart. */
#define KERNEL_RUN 64
static void transform_kernels4(float *U, const float *w, int OC, int C, int turn)
{
    size_t plane = (size_t)OC * C;
    for (size_t k0 = 0; k0 < plane; k0 += KERNEL_RUN) {
        size_t n = plane - k0 < KERNEL_RUN ? plane - k0 : KERNEL_RUN;
        float run[XI4][KERNEL_RUN];
        for (size_t k = 0; k < n; k++) {
            size_t at = k0 + k; /* U's entry [o, c], or turned [c, o] */
            size_t o = turn ? at % (size_t)OC : at / (size_t)C;
            size_t c = turn ? at / (size_t)OC : at % (size_t)C;
            const float *g = w + (o * C + c) * 9;
            float t[3][6]; /* (G g) by column j of g */
            for (int j = 0; j < 3; j++)
                g6(t[j], g[turn ? 8 - j : j], g[turn ? 5 - j : 3 + j], g[turn ? 2 - j : 6 + j]);
            for (int i = 0; i < 6; i++) {
                float r[6];
                g6(r, t[0][i], t[1][i], t[2][i]);
                for (int j = 0; j < 6; j++) run[6 * i + j][k] = r[j];
            }
        }
        for (int xi = 0; xi < XI4; xi++) memcpy(U + xi * plane + k0, run[xi], n * sizeof(float));
    }
}

/* o = G^T v of the six entries v0..v5 (the G of g6): the rows (1/4, -1/6, -1/6, 1/24, 1/24,
 * 0), (0, -1/6, 1/6, 1/12, -1/12, 0) and (0, -1/6, -1/6, 1/6, 1/6, 1) times v. */
static void gt6(float o[3], const float v[6])
{
    const float sixth = 1.0f / 6.0f, twelfth = 1.0f / 12.0f, twenty_fourth = 1.0f / 24.0f;
    float s12 = v[1] + v[2], s34 = v[3] + v[4];
    o[0] = (0.25f * v[0] - s12 * sixth) + s34 * twenty_fourth;
    o[1] = (v[2] - v[1]) * sixth + (v[3] - v[4]) * twelfth;
    o[2] = (s34 - s12) * sixth + v[5];
}

/* dweight [OC, C, 3, 3] += G^T u G for each u of dUt [36, C, OC] (entry 6 i + j: the i-th
 * down, the j-th across). */
static void fold_kernels4(float *dweight, const float *dUt, int OC, int C)
{
    size_t plane = (size_t)OC * C;
    for (size_t k = 0; k < plane; k++) { /* dUt's [c, oc] */
        float t[3][6];                     /* G^T u, by column j of u */
        for (int j = 0; j < 6; j++) {
            float v[6], o[3];
            for (int i = 0; i < 6; i++) v[i] = dUt[(size_t)(6 * i + j) * plane + k];
            gt6(o, v);
            for (int r = 0; r < 3; r++) t[r][j] = o[r];
        }
        float *g = dweight + (k % (size_t)OC * (size_t)C + k / (size_t)OC) * 9;
        for (int r = 0; r < 3; r++) {
            float o[3];
            gt6(o, t[r]);
            for (int c = 0; c < 3; c++) g[3 * r + c] += o[c];
        }
    }
}

/* The columns tb.. of V [xi, C, ld] (entries vs apart) = the input blocks of the C planes of
 * count samples x [count, C, IH, IW] (cn_winograd4_input, the same channel of the samples a
 * call). */
static void transform_input(float *V, const float *x, int count, int tb, const plan *p,
                            float *row)
{
    size_t plane = (size_t)p->IH * p->IW;
    cn_winograd_plane s = plane_of(p, count, p->C * plane);
    for (int c = 0; c < p->C; c++)
        cn_winograd4_input(V + (size_t)c * p->ld + tb, (ptrdiff_t)p->vs, x + c * plane, &s, row);
}

/* The rows tb.. of M [xi, ld, OC] (entries ms apart) = A dY A^T of the tiles of the output
 * gradient d [OC, OH, OW] of one sample: d turned round into turned's rows (whole, or row by
 * row where a row of tiles is wider than the plane), inside the zeros the caller made once,
 * then transformed there. */
static void transform_gradient_rows(float *M, const float *d, int tb, const plan *p,
                                    float *turned)
{
    int plane = p->OH * p->OW;
    if (4 * p->TW == p->OW)
        cn_transpose(turned, p->OC, d, plane, p->OC, plane);
    else
        for (int y = 0; y < p->OH; y++)
            cn_transpose(turned + (size_t)y * 4 * p->TW * p->OC, p->OC, d + (size_t)y * p->OW,
                         plane, p->OC, p->OW);
    cn_winograd_plane s = plane_of(p, 1, 0);
    cn_winograd4_gradient_rows(M + (size_t)tb * p->OC, (ptrdiff_t)p->ms, turned, &s, p->OC);
}

/* The outputs y [count, OC, OH, OW] of count samples from the products in M's columns tb..
 * (+ bias), around the caches with stream. */
static void transform_output(float *y, const float *M, int count, int tb, const float *bias,
                             int stream, const plan *p, float *row)
{
    size_t plane = (size_t)p->OH * p->OW;
    cn_winograd_plane s = plane_of(p, count, p->OC * plane);
    s.stream = stream;
    for (int oc = 0; oc < p->OC; oc++)
        cn_winograd4_output(y + oc * plane, M + (size_t)oc * p->ld + tb, (ptrdiff_t)p->ms, &s,
                            bias ? bias[oc] : 0.0f, row);
}

/* dUt [C, OC] += V [C, n] M [n, OC] over n tiles (V's rows ld apart): a plain product
 * (broadcasts from V, whole vectors of M's rows) in chains of CN_CHAIN tiles
 * (cn_sgemm_chained), each element's sum over the tiles of a batch rounded about as a tree. */
static void weight_gradient_product(float *dUt, const float *V, const float *M, int n,
                                    const plan *p)
{
    cn_sgemm_chained(p->C, p->OC, n, V, p->ld, M, p->OC, dUt, p->OC);
}

/* ---- the passes ---- */

/* Shows the nb samples of a block's outputs in scratch (from sample first) to shown, then
 * stores them at out, around the caches with stream. */
static void show_block(float *out, const float *scratch, int nb, int first, size_t floats,
                       int stream, const cn_taker *shown)
{
    for (int k = 0; k < nb; k++) {
        const float *from = scratch + (size_t)k * floats;
        shown->take(shown->ctx, first + k, from);
        if (stream)
            cn_copy_streamed(out + (size_t)k * floats, from, floats);
        else
            memcpy(out + (size_t)k * floats, from, floats * sizeof *out);
    }
}

/* The samples of the group from sample b of a block of nb: p->group, fewer at the block's end. */
static int group_at(const plan *p, int nb, int b) { return nb - b < p->group ? nb - b : p->group; }

/* out [B, OC, OH, OW] = the convolution of in [B, C, IH, IW] with the transformed kernels U,
 * stored around the caches with stream; with shown (take not NULL), each block's outputs go
 * through scratch, shown there as samples first.. . */
static void convolve(float *out, const cn_samples *in, const float *U, const float *bias,
                     int B, int stream, const plan *p, parts w, const cn_taker *shown,
                     int first)
{
    int show = shown && shown->take;
    size_t in_floats = input_floats(p), out_floats = output_floats(p);
    memset(w.zero, 0, (size_t)p->OC * sizeof *w.zero);
    for (int b0 = 0; b0 < B; b0 += p->nb) {
        int nb = B - b0 < p->nb ? B - b0 : p->nb;
        for (int b = 0; b < nb; b += p->group) {
            int count = group_at(p, nb, b);
            transform_input(w.V, cn_samples_at(in, b0 + b, count, in_floats, w.made), count,
                            b * p->T, p, w.row);
        }
        for (int xi = 0; xi < p->xi; xi++)
            cn_sgemm_rows_from(p->OC, nb * p->T, p->C, U + (size_t)xi * p->OC * p->C, p->C,
                               w.V + xi * p->vs, p->ld, w.zero, w.M + xi * p->ms, p->ld);
        float *to = show ? w.shown : out + (size_t)b0 * out_floats;
        for (int b = 0; b < nb; b += p->group)
            transform_output(to + (size_t)b * out_floats, w.M, group_at(p, nb, b), b * p->T,
                             bias, stream && !show, p, w.row);
        if (show)
            show_block(out + (size_t)b0 * out_floats, w.shown, nb, first + b0, out_floats,
                       stream, shown);
    }
}

void cn_winograd_forward(float *out, const cn_samples *in, const float *weight,
                         const float *bias, int B, const cn_conv_shape *s, float *scratch,
                         const cn_taker *shown)
{
    plan p = forward_plan(s);
    parts w;
    carve(&p, scratch, &w);
    transform_kernels4(w.U, weight, s->OC, s->C, 0);
    convolve(out, in, w.U, bias, B, cn_streamed((size_t)B * s->OC * s->OH * s->OW), &p, w,
             shown, 0);
}

/* The weight gradient, and the input gradient (din, or none) of each block of samples right
 * after it, while that block's output gradient, just read (or made), is still in the caches:
 * the same sums in the same order as one pass after the other. */
void cn_winograd_backward(float *din, float *dweight, const cn_samples *dout,
                          const cn_samples *in, const float *weight, int B,
                          const cn_conv_shape *s, float *scratch, const cn_taker *shown)
{
    plan p = weight_gradient_plan(s), q = input_gradient_plan(s);
    parts w, g;
    carve(&q, scratch + carve(&p, scratch, &w), &g);
    size_t in_floats = input_floats(&p), out_floats = output_floats(&p);
    float *made_dout = w.made + cn_whole_lines((size_t)p.group * in_floats);
    int stream = cn_streamed((size_t)B * in_floats);
    if (din) transform_kernels4(g.U, weight, s->OC, s->C, 1);
    memset(w.U, 0, (size_t)p.xi * s->OC * s->C * sizeof *w.U);
    memset(w.turned, 0, turned_floats(&p) * sizeof *w.turned);
    for (int b0 = 0; b0 < B; b0 += p.nb) {
        int nb = B - b0 < p.nb ? B - b0 : p.nb;
        const float *d = cn_samples_at(dout, b0, nb, out_floats, made_dout);
        for (int b = 0; b < nb; b += p.group) {
            int count = group_at(&p, nb, b);
            transform_input(w.V, cn_samples_at(in, b0 + b, count, in_floats, w.made), count,
                            b * p.T, &p, w.row);
        }
        for (int b = 0; b < nb; b++)
            transform_gradient_rows(w.M, d + (size_t)b * out_floats, b * p.T, &p, w.turned);
        for (int xi = 0; xi < p.xi; xi++)
            weight_gradient_product(w.U + (size_t)xi * s->OC * s->C, w.V + xi * p.vs,
                                    w.M + xi * p.ms, nb * p.T, &p);
        if (din)
            convolve(din + (size_t)b0 * in_floats, &(cn_samples){.at = d}, g.U, NULL, nb, stream,
                     &q, g, shown, b0);
    }
    fold_kernels4(dweight, w.U, s->OC, s->C);
}
