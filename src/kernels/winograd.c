/* winograd.c — 3x3 convolutions of stride 1 (zero padding 0, 1 or 2) by Winograd's minimal
 * filtering F(2x2, 3x3) (Lavin and Gray, 2016): each 2x2 block ("tile") of an output plane comes
 * from the 4x4 block of input around it with 16 products per pair of channels instead of 36.
 * With V = B^T d B the transformed input blocks, U = G g G^T the transformed kernels and
 * Y = A^T (U . V) A the output blocks, the products for all tiles of a few samples are 16
 * matrix products M[xi] = U[xi] [OC, C] * V[xi] [C, tiles] (cn_sgemm). Backward is the same
 * algebra turned round: the weight gradient is G^T (sum over tiles of (A dY A^T) . V) G, 16
 * products dU[xi] += dM[xi] [OC, tiles] * V[xi]^T; the input gradient is the forward algorithm
 * run on the output gradient with the kernels turned by 180 degrees and padding 2 - pad.
 * The transforms are plain loops over a row of tiles, the even and odd columns of the input
 * split apart so that they vectorise. Every sum runs in an order fixed by the shapes and the
 * instruction set. Not for other kernel sizes or strides, and not for bf16 (conv.c keeps its
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
} plan;

static plan plan_of(int C, int H, int W, int OC, int pad)
{
    plan p = {C, H, W, OC, pad, H + 2 * pad - 2, W + 2 * pad - 2, 0, 0, 0, 0, 0};
    p.TH = (p.OH + 1) / 2, p.TW = (p.OW + 1) / 2, p.T = p.TH * p.TW;
    p.nb = BLOCK_TILES / p.T > 1 ? BLOCK_TILES / p.T : 1;
    p.ld = (p.nb * p.T + CN_LINE_FLOATS - 1) / CN_LINE_FLOATS * CN_LINE_FLOATS;
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
    float *row; /* a plane's steps between the transforms' passes */
} parts;

static size_t lines(size_t floats)
{
    return (floats + CN_LINE_FLOATS - 1) / CN_LINE_FLOATS * CN_LINE_FLOATS;
}

static size_t carve(const plan *p, float *at, parts *out)
{
    size_t u = lines((size_t)XI * p->OC * p->C), v = lines((size_t)XI * p->C * p->ld);
    size_t m = lines((size_t)XI * p->OC * p->ld);
    size_t r = lines(12 * ((size_t)p->TH + 1) * ((size_t)p->TW + 1));
    if (out) *out = (parts){at, at + u, at + u + v, at + u + v + m};
    return u + v + m + r;
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

/* e [n], o [n]: the even and odd columns of a plane's row r [W] as seen with padding pad:
 * e[k] = r[2k - pad], o[k] = r[2k + 1 - pad], zero outside the row (r NULL: all zero). */
static void split_row(float *e, float *o, int n, const float *r, int pad, int W)
{
    int lo = (pad + 1) / 2, hi = (W + pad) / 2;
    hi = hi < n ? hi : n;
    lo = lo < hi ? lo : hi;
    if (!r) lo = hi = 0;
    for (int k = lo; k < hi; k++) e[k] = r[2 * k - pad], o[k] = r[2 * k + 1 - pad];
    for (int k = 0; k < n; k++) {
        if (k >= lo && k < hi) continue;
        int x = 2 * k - pad;
        e[k] = r && x >= 0 && x < W ? r[x] : 0.0f;
        o[k] = r && x + 1 >= 0 && x + 1 < W ? r[x + 1] : 0.0f;
    }
}

/* The row of tiles' entries across: v0..v3 [n] = (d0 - d2, d1 + d2, d2 - d1, d1 - d3) of the
 * columns d0..d3 = (e[t], o[t], e[t + 1], o[t + 1]) of each tile t. */
static void transform_across(float *restrict v0, float *restrict v1, float *restrict v2,
                             float *restrict v3, const float *restrict e,
                             const float *restrict o, int n)
{
    for (int t = 0; t < n; t++) {
        v0[t] = e[t] - e[t + 1], v1[t] = o[t] + e[t + 1];
        v2[t] = e[t + 1] - o[t], v3[t] = o[t] - o[t + 1];
    }
}

/* The same down the rows of every row of tiles at once: r0..r3 [f] = (d0 - d2, d1 + d2, d2 - d1,
 * d1 - d3) of d0..d3 = (even[f], odd[f], even[f + n], odd[f + n]), for f < count. */
static void transform_down(float *restrict r0, float *restrict r1, float *restrict r2,
                           float *restrict r3, const float *restrict even,
                           const float *restrict odd, int n, int count)
{
    for (int f = 0; f < count; f++) {
        r0[f] = even[f] - even[f + n], r1[f] = odd[f] + even[f + n];
        r2[f] = even[f + n] - odd[f], r3[f] = odd[f] - odd[f + n];
    }
}

/* V's columns tb.. = the transformed input blocks of one sample x [C, IH, IW], tile by tile
 * (ty, tx) in row order. Each plane is taken in three passes over all of it, so that no pass
 * reads what the one before has just stored (the vector loads would wait for scalar stores):
 * split into its four quarters of even and odd rows and columns q[2 row parity + column
 * parity] [TH + 1, n] (n = TW + 1; the padding's zeros included), B^T down the rows into r[4
 * row + column parity] [TH, n], then B^T across into V. row: 12 (TH + 1) (TW + 1) floats. */
static void transform_input(float *V, const float *x, int tb, const plan *p, float *row)
{
    int n = p->TW + 1, rows = 2 * p->TH + 2, count = p->TH * n;
    size_t xs = (size_t)p->C * p->ld, qs = (size_t)(p->TH + 1) * n;
    float *q = row, *r = row + 4 * qs;
    for (int c = 0; c < p->C; c++) {
        const float *plane = x + (size_t)c * p->IH * p->IW;
        for (int y = 0; y < rows; y++) {
            int iy = y - p->pad;
            const float *in = iy >= 0 && iy < p->IH ? plane + (size_t)iy * p->IW : NULL;
            float *at = q + 2 * (y & 1) * qs + (size_t)(y >> 1) * n;
            split_row(at, at + qs, n, in, p->pad, p->IW);
        }
        for (int cp = 0; cp < 2; cp++)
            transform_down(r + (size_t)cp * count, r + (size_t)(2 + cp) * count,
                           r + (size_t)(4 + cp) * count, r + (size_t)(6 + cp) * count,
                           q + cp * qs, q + (2 + cp) * qs, n, count);
        float *v = V + (size_t)c * p->ld + tb;
        for (int i = 0; i < 4; i++)
            for (int ty = 0; ty < p->TH; ty++) {
                const float *e = r + (size_t)(2 * i) * count + (size_t)ty * n, *o = e + count;
                float *vt = v + (size_t)(4 * i) * xs + (size_t)ty * p->TW;
                transform_across(vt, vt + xs, vt + 2 * xs, vt + 3 * xs, e, o, p->TW);
            }
    }
}

/* a [n] = m0 + m1 + m2, b [n] = m1 - m2 - m3: A^T applied down the rows of the tiles. */
static void output_down(float *restrict a, float *restrict b, const float *restrict m0,
                        const float *restrict m1, const float *restrict m2,
                        const float *restrict m3, int n)
{
    for (int t = 0; t < n; t++) a[t] = m0[t] + m1[t] + m2[t], b[t] = m1[t] - m2[t] - m3[t];
}

/* d [w] = A^T across the columns s0..s3 [(w + 1) / 2] of a row of tiles, (s0 + s1 + s2, s1 - s2
 * - s3) for each, side by side (+ bias). */
static void output_across(float *restrict d, const float *restrict s0, const float *restrict s1,
                          const float *restrict s2, const float *restrict s3, int w,
                          float bias)
{
    int t = 0;
    for (; t < w / 2; t++)
        d[2 * t] = s0[t] + s1[t] + s2[t] + bias, d[2 * t + 1] = s1[t] - s2[t] - s3[t] + bias;
    if (w & 1) d[2 * t] = s0[t] + s1[t] + s2[t] + bias;
}

/* One sample's output y [OC, OH, OW] = A^T m A (+ bias) of the products in M's columns tb..,
 * a plane at a time: down the rows of all its tiles, then across each row of tiles. row:
 * 12 (TH + 1) (TW + 1) floats. */
static void transform_output(float *y, const float *M, int tb, const float *bias, const plan *p,
                             float *row)
{
    int T = p->T, TW = p->TW;
    size_t xs = (size_t)p->OC * p->ld;
    for (int oc = 0; oc < p->OC; oc++) {
        const float *m = M + (size_t)oc * p->ld + tb;
        for (int j = 0; j < 4; j++) /* row + j T: row 0 of A^T m, column j; row + (4 + j) T: row 1 */
            output_down(row + (size_t)j * T, row + (size_t)(4 + j) * T, m + j * xs,
                        m + (4 + j) * xs, m + (8 + j) * xs, m + (12 + j) * xs, T);
        float b = bias ? bias[oc] : 0.0f;
        for (int oy = 0; oy < p->OH; oy++) {
            const float *s = row + (size_t)(oy & 1) * 4 * T + (size_t)(oy >> 1) * TW;
            output_across(y + ((size_t)oc * p->OH + oy) * p->OW, s, s + T, s + 2 * T, s + 3 * T,
                          p->OW, b);
        }
    }
}

/* a0..a3 [n] = (e, e + o, e - o, -o): A applied across the columns (e, o) of the tiles' output
 * gradients. */
static void gradient_across(float *restrict a0, float *restrict a1, float *restrict a2,
                            float *restrict a3, const float *restrict e,
                            const float *restrict o, int n)
{
    for (int t = 0; t < n; t++) a0[t] = e[t], a1[t] = e[t] + o[t], a2[t] = e[t] - o[t], a3[t] = -o[t];
}

/* m0..m3 [n] = (a, a + b, a - b, -b): A applied down the rows (a, b). */
static void gradient_down(float *restrict m0, float *restrict m1, float *restrict m2,
                          float *restrict m3, const float *restrict a, const float *restrict b,
                          int n)
{
    for (int t = 0; t < n; t++) m0[t] = a[t], m1[t] = a[t] + b[t], m2[t] = a[t] - b[t], m3[t] = -b[t];
}

/* M's columns tb.. = A dY A^T for the tiles of one sample's output gradient d [OC, OH, OW] (the
 * positions past OH and OW count as zeros), a plane at a time in three passes as in
 * transform_input: the quarters q[2 row parity + column parity] [TH, TW], A across into a[4
 * row parity + column j] [T], A down into M. row: 12 (TH + 1) (TW + 1) floats. */
static void transform_gradient(float *M, const float *d, int tb, const plan *p, float *row)
{
    int T = p->T, TW = p->TW;
    size_t xs = (size_t)p->OC * p->ld;
    float *q = row, *a = row + 4 * (size_t)T;
    for (int oc = 0; oc < p->OC; oc++) {
        const float *plane = d + (size_t)oc * p->OH * p->OW;
        for (int y = 0; y < 2 * p->TH; y++) {
            float *at = q + (size_t)(2 * (y & 1)) * T + (size_t)(y >> 1) * TW;
            split_row(at, at + T, TW, y < p->OH ? plane + (size_t)y * p->OW : NULL, 0, p->OW);
        }
        for (int rp = 0; rp < 2; rp++) {
            float *ar = a + (size_t)(4 * rp) * T;
            const float *e = q + (size_t)(2 * rp) * T;
            gradient_across(ar, ar + T, ar + 2 * T, ar + 3 * T, e, e + T, T);
        }
        float *m = M + (size_t)oc * p->ld + tb;
        for (int j = 0; j < 4; j++)
            gradient_down(m + j * xs, m + (4 + j) * xs, m + (8 + j) * xs, m + (12 + j) * xs,
                          a + (size_t)j * T, a + (size_t)(4 + j) * T, T);
    }
}

/* ---- the passes ---- */

/* out [B, OC, OH, OW] = the convolution of in [B, C, IH, IW] with the transformed kernels U. */
static void convolve(float *out, const float *in, const float *U, const float *bias, int B,
                     const plan *p, parts w)
{
    size_t in_floats = (size_t)p->C * p->IH * p->IW, out_floats = (size_t)p->OC * p->OH * p->OW;
    for (int b0 = 0; b0 < B; b0 += p->nb) {
        int nb = B - b0 < p->nb ? B - b0 : p->nb;
        for (int b = 0; b < nb; b++)
            transform_input(w.V, in + (size_t)(b0 + b) * in_floats, b * p->T, p, w.row);
        for (int xi = 0; xi < XI; xi++)
            cn_sgemm(0, 0, p->OC, nb * p->T, p->C, U + (size_t)xi * p->OC * p->C, p->C,
                     w.V + (size_t)xi * p->C * p->ld, p->ld, 0, w.M + (size_t)xi * p->OC * p->ld,
                     p->ld);
        for (int b = 0; b < nb; b++)
            transform_output(out + (size_t)(b0 + b) * out_floats, w.M, b * p->T, bias, p, w.row);
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
            cn_sgemm(0, 1, s->OC, s->C, nb * p.T, w.M + (size_t)xi * s->OC * p.ld, p.ld,
                     w.V + (size_t)xi * s->C * p.ld, p.ld, 1, w.U + (size_t)xi * s->OC * s->C,
                     s->C);
    }
    fold_kernels(dweight, w.U, s->OC, s->C);
    if (!din) return;
    plan q = input_gradient_plan(s);
    carve(&q, scratch, &w);
    transform_kernels(w.U, weight, s->OC, s->C, 1);
    convolve(din, dout, w.U, NULL, B, &q, w);
}
