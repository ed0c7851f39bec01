/* winograd.c — 3x3 convolutions of stride 1 (zero padding 0, 1 or 2) by Winograd's minimal
 * filtering F(2x2, 3x3) (Lavin and Gray, 2016): each 2x2 block ("tile") of an output plane comes
 * from the 4x4 block of input around it with 16 products per pair of channels instead of 36.
 * With V = B^T d B the transformed input blocks, U = G g G^T the transformed kernels and
 * Y = A^T (U . V) A the output blocks, the products for all tiles of a few samples are 16
 * matrix products M[xi] = U[xi] [OC, C] * V[xi] [C, tiles] (cn_sgemm). Backward is the same
 * algebra turned round: the weight gradient is G^T (sum over tiles of (A dY A^T) . V) G, 16
 * products dU[xi] += dM[xi] [OC, tiles] * V[xi]^T; the input gradient is the forward algorithm
 * run on the output gradient with the kernels turned by 180 degrees and padding 2 - pad.
 * The transforms, a plane at a time, are vector kernels of each instruction set (gemm.h,
 * winograd_kernels.inc). Every sum runs in an order fixed by the shapes and the instruction
 * set. Not for other kernel sizes or strides, and not for bf16 (conv.c keeps its
 * patch products for those). */
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/winograd.h"
#include "layers/layers.h"

#define XI 16           /* the entries of a transformed 4x4 block */
#define BLOCK_TILES 256 /* about this many tiles (whole samples) go through the products at once */
#define MIN_CHANNELS 8  /* fewer channels make products too thin to gain from the transforms */

/* A convolution as the algorithm sees it: the input gradient's is the forward one of another. */
typedef struct {
    int C, IH, IW; /* input planes, zero-padded by pad on every side */
    int OC, pad;
    int OH, OW;
    int TH, TW, T; /* 2x2 output tiles: per column, per row, per sample */
    int nb;        /* samples per block */
    int ld;        /* the rows of V and M: nb * T tiles, on whole lines */
    size_t vs, ms; /* from one entry's block of V [C, ld] (of M [OC, ld]) to the next's */
} plan;

/* The floats from one entry's block of n floats to the next's: n on an odd number of cache
 * lines. The transforms write (and read) the 16 blocks side by side; blocks a multiple of 4 KB
 * apart would all fall in the same few cache sets and evict each other. */
static size_t block_stride(size_t n)
{
    size_t lines = cn_whole_lines(n) / CN_LINE_FLOATS;
    return (lines | 1) * CN_LINE_FLOATS;
}

static plan plan_of(int C, int H, int W, int OC, int pad)
{
    plan p = {C, H, W, OC, pad, H + 2 * pad - 2, W + 2 * pad - 2, 0, 0, 0, 0, 0, 0, 0};
    p.TH = (p.OH + 1) / 2, p.TW = (p.OW + 1) / 2, p.T = p.TH * p.TW;
    p.nb = BLOCK_TILES / p.T > 1 ? BLOCK_TILES / p.T : 1;
    p.ld = (int)cn_whole_lines((size_t)p.nb * p.T);
    p.vs = block_stride((size_t)p.C * p.ld), p.ms = block_stride((size_t)p.OC * p.ld);
    return p;
}

static plan forward_plan(const cn_conv_shape *s)
{
    return plan_of(s->C, s->H, s->W, s->OC, s->pad);
}

static plan input_gradient_plan(const cn_conv_shape *s)
{
    return plan_of(s->OC, s->OH, s->OW, s->C, 2 - s->pad);
}

int cn_winograd_fits(const cn_conv_shape *s)
{
    return s->K == 3 && s->stride == 1 && s->pad <= 2 && s->OH >= 1 && s->OW >= 1 &&
           s->C >= MIN_CHANNELS && s->OC >= MIN_CHANNELS;
}

/* ---- scratch ---- */

typedef struct {
    float *U;   /* [16, OC, C]: transformed kernels (the weight gradient's sums in backward) */
    float *V;   /* [16, C, ld]: transformed input blocks */
    float *M;   /* [16, OC, ld]: products (transformed output gradients in backward) */
    float *row;  /* the input transform's zero-bordered copy of a plane */
    float *zero; /* [OC] zeros: where the products' sums start */
} parts;

static size_t carve(const plan *p, float *at, parts *out)
{
    size_t u = cn_whole_lines((size_t)XI * p->OC * p->C);
    size_t v = XI * p->vs, m = XI * p->ms;
    size_t r = cn_whole_lines((2 * (size_t)p->TH + 2) * (2 * (size_t)p->TW + 32));
    size_t z = cn_whole_lines((size_t)p->OC);
    if (out) *out = (parts){at, at + u, at + u + v, at + u + v + m, at + u + v + m + r};
    return u + v + m + r + z;
}

size_t cn_winograd_floats(const cn_conv_shape *s)
{
    plan f = forward_plan(s), g = input_gradient_plan(s);
    size_t a = carve(&f, NULL, NULL), b = carve(&g, NULL, NULL);
    return a > b ? a : b;
}

/* ---- transforms ---- */

/* U [16, rows, cols] = G g G^T for each kernel g of w [OC, C, 3, 3]: rows = OC and cols = C, or
 * with turn, rows = C, cols = OC and each g turned by 180 degrees (the input gradient's). */
static void transform_kernels(float *U, const float *w, int OC, int C, int turn)
{
    size_t plane = (size_t)OC * C;
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) {
            const float *g = w + ((size_t)o * C + c) * 9;
            float t[4][3]; /* G g */
            for (int j = 0; j < 3; j++) {
                float a = g[turn ? 8 - j : j], b = g[turn ? 5 - j : 3 + j];
                float d = g[turn ? 2 - j : 6 + j];
                t[0][j] = a, t[1][j] = 0.5f * (a + b + d), t[2][j] = 0.5f * (a - b + d);
                t[3][j] = d;
            }
            float *u = U + (turn ? (size_t)c * OC + o : (size_t)o * C + c);
            for (int i = 0; i < 4; i++, u += 4 * plane) {
                float a = t[i][0], b = t[i][1], d = t[i][2];
                u[0] = a, u[plane] = 0.5f * (a + b + d), u[2 * plane] = 0.5f * (a - b + d);
                u[3 * plane] = d;
            }
        }
}

/* dweight [OC, C, 3, 3] += G^T u G for each u of dU [16, OC, C]. */
static void fold_kernels(float *dweight, const float *dU, int OC, int C)
{
    size_t plane = (size_t)OC * C;
    for (size_t k = 0; k < plane; k++) {
        float t[3][4]; /* G^T u */
        for (int j = 0; j < 4; j++) {
            float u0 = dU[(size_t)j * plane + k], u1 = dU[(size_t)(4 + j) * plane + k];
            float u2 = dU[(size_t)(8 + j) * plane + k], u3 = dU[(size_t)(12 + j) * plane + k];
            t[0][j] = u0 + 0.5f * (u1 + u2), t[1][j] = 0.5f * (u1 - u2);
            t[2][j] = 0.5f * (u1 + u2) + u3;
        }
        float *g = dweight + k * 9;
        for (int r = 0; r < 3; r++) {
            const float *a = t[r];
            g[3 * r] += a[0] + 0.5f * (a[1] + a[2]);
            g[3 * r + 1] += 0.5f * (a[1] - a[2]);
            g[3 * r + 2] += 0.5f * (a[1] + a[2]) + a[3];
        }
    }
}

/* The shape of one plane for the transforms (gemm.h). */
static cn_winograd_plane plane_of(const plan *p)
{
    return (cn_winograd_plane){p->IH, p->IW, p->pad, p->OH, p->OW, p->TH, p->TW};
}

/* A transform of one plane into a tile's 16 entries (gemm.h): cn_winograd_input or
 * cn_winograd_gradient. */
typedef void plane_transform(float *to, ptrdiff_t xs, const float *plane,
                             const cn_winograd_plane *s, float *row);

/* The columns tb.. of X [16, planes, ld] (entries xs apart) = f of each of the planes [planes,
 * h, w] of one sample: its input blocks (f = cn_winograd_input: planes C of IH x IW, X = V) or
 * its output gradient's (cn_winograd_gradient: OC of OH x OW, X = M). */
static void transform_planes(plane_transform *f, float *X, size_t xs, const float *sample,
                             int planes, size_t plane_floats, int tb, const plan *p, float *row)
{
    cn_winograd_plane s = plane_of(p);
    for (int i = 0; i < planes; i++)
        f(X + (size_t)i * p->ld + tb, (ptrdiff_t)xs, sample + (size_t)i * plane_floats, &s, row);
}

static void transform_input(float *V, const float *x, int tb, const plan *p, float *row)
{
    transform_planes(cn_winograd_input, V, p->vs, x, p->C, (size_t)p->IH * p->IW, tb, p, row);
}

static void transform_gradient(float *M, const float *d, int tb, const plan *p, float *row)
{
    transform_planes(cn_winograd_gradient, M, p->ms, d, p->OC, (size_t)p->OH * p->OW, tb, p,
                     row);
}

/* One sample's output y [OC, OH, OW] from the products in M's columns tb.. (+ bias). */
static void transform_output(float *y, const float *M, int tb, const float *bias, const plan *p)
{
    cn_winograd_plane s = plane_of(p);
    size_t xs = p->ms;
    for (int oc = 0; oc < p->OC; oc++)
        cn_winograd_output(y + (size_t)oc * p->OH * p->OW, M + (size_t)oc * p->ld + tb,
                           (ptrdiff_t)xs, &s, bias ? bias[oc] : 0.0f);
}

/* ---- the passes ---- */

/* out [B, OC, OH, OW] = the convolution of in [B, C, IH, IW] with the transformed kernels U. */
static void convolve(float *out, const float *in, const float *U, const float *bias, int B,
                     const plan *p, parts w)
{
    size_t in_floats = (size_t)p->C * p->IH * p->IW, out_floats = (size_t)p->OC * p->OH * p->OW;
    memset(w.zero, 0, (size_t)p->OC * sizeof *w.zero);
    for (int b0 = 0; b0 < B; b0 += p->nb) {
        int nb = B - b0 < p->nb ? B - b0 : p->nb;
        for (int b = 0; b < nb; b++)
            transform_input(w.V, in + (size_t)(b0 + b) * in_floats, b * p->T, p, w.row);
        for (int xi = 0; xi < XI; xi++)
            cn_sgemm_rows_from(p->OC, nb * p->T, p->C, U + (size_t)xi * p->OC * p->C, p->C,
                               w.V + xi * p->vs, p->ld, w.zero, w.M + xi * p->ms, p->ld);
        for (int b = 0; b < nb; b++)
            transform_output(out + (size_t)(b0 + b) * out_floats, w.M, b * p->T, bias, p);
    }
}

void cn_winograd_forward(float *out, const float *in, const float *weight, const float *bias,
                         int B, const cn_conv_shape *s, float *scratch)
{
    plan p = forward_plan(s);
    parts w;
    carve(&p, scratch, &w);
    transform_kernels(w.U, weight, s->OC, s->C, 0);
    convolve(out, in, w.U, bias, B, &p, w);
}

void cn_winograd_backward(float *din, float *dweight, const float *dout, const float *in,
                          const float *weight, int B, const cn_conv_shape *s, float *scratch)
{
    plan p = forward_plan(s);
    parts w;
    carve(&p, scratch, &w);
    size_t in_floats = (size_t)s->C * s->H * s->W, out_floats = (size_t)s->OC * s->OH * s->OW;
    memset(w.U, 0, (size_t)XI * s->OC * s->C * sizeof *w.U);
    for (int b0 = 0; b0 < B; b0 += p.nb) {
        int nb = B - b0 < p.nb ? B - b0 : p.nb;
        for (int b = 0; b < nb; b++) {
            transform_input(w.V, in + (size_t)(b0 + b) * in_floats, b * p.T, &p, w.row);
            transform_gradient(w.M, dout + (size_t)(b0 + b) * out_floats, b * p.T, &p, w.row);
        }
        for (int xi = 0; xi < XI; xi++)
            cn_sgemm(0, 1, s->OC, s->C, nb * p.T, w.M + xi * p.ms, p.ld, w.V + xi * p.vs, p.ld,
                     1, w.U + (size_t)xi * s->OC * s->C, s->C);
    }
    fold_kernels(dweight, w.U, s->OC, s->C);
    if (!din) return;
    plan q = input_gradient_plan(s);
    carve(&q, scratch, &w);
    transform_kernels(w.U, weight, s->OC, s->C, 1);
    convolve(din, dout, w.U, NULL, B, &q, w);
}
