/* conv.c — 2D convolution (valid padding, stride 1, with bias) on top of cn_sgemm, one sample
 * at a time so the patch buffer stays in cache. Forward multiplies the weights by the
 * channel-major patch matrix (im2col); the weight gradient uses the position-major one (im2row)
 * when there are few output positions, so that it too is a plain product rather than many short
 * dot products; the input gradient goes back through col2im. A convolution that feeds a
 * max-pool takes its backward pass from the pool's picks instead (cn_conv2d_pool_backward, at
 * the end). The patch copies are vector kernels chosen with the GEMM's (gemm.h). The _bf16
 * variants (--precision bf16) do the same products on bf16 operands packed in pairs
 * (cn_gemm_bf16). No padding, stride or dilation: the models here do not use them. */
#include <assert.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/conv.h"
#include "layers/layers.h"

/* Below this many output positions the weight gradient is computed from im2row. */
#define CN_CONV_ROW_GRADIENT_POSITIONS 256

/* The shape's numbers as the locals the kernels below were written with (valid padding and
 * stride 1 only, so far). */
#define UNPACK(s)                                                                            \
    int C = (s)->C, H = (s)->H, W = (s)->W, OC = (s)->OC, K = (s)->K;                        \
    (void)C, (void)H, (void)W, (void)OC, (void)K;                                            \
    assert((s)->stride == 1 && (s)->pad == 0)

/* x[0] + ... + x[n-1] in sixteen interleaved partial sums folded in a fixed tree: the order
 * depends only on n, and the lanes vectorise. */
static float sum_floats(const float *x, int n)
{
    float lane[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i + l];
    for (int l = 0; i < n; i++, l++) lane[l] += x[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

size_t cn_conv2d_col_floats(const cn_conv_shape *s)
{
    return (size_t)s->C * s->K * s->K * s->OH * s->OW + CN_IM2ROW_SLACK;
}

void cn_conv2d_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, const cn_conv_shape *s, float *col)
{
    UNPACK(s);
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    for (int b = 0; b < B; b++) {
        float *o = out + (size_t)b * OC * P;
        cn_im2col(col, in + (size_t)b * C * H * W, C, H, W, K);
        cn_sgemm_rows_from(OC, P, CKK, weight, CKK, col, P, bias, o, P);
    }
}

/* dweight [OC, CKK] += dout_b [OC, P] * patches^T, for one sample. */
static void weight_gradient(float *dweight, const float *dout_b, const float *in_b, int C, int H,
                            int W, int OC, int K, float *col)
{
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    if (P < CN_CONV_ROW_GRADIENT_POSITIONS) {
        cn_im2row(col, CKK, in_b, C, H, W, K);
        cn_sgemm(0, 0, OC, CKK, P, dout_b, P, col, CKK, 1, dweight, CKK);
    } else {
        cn_im2col(col, in_b, C, H, W, K);
        cn_sgemm(0, 1, OC, CKK, P, dout_b, P, col, P, 1, dweight, CKK);
    }
}

void cn_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, const cn_conv_shape *s,
                        float *col)
{
    UNPACK(s);
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    for (int b = 0; b < B; b++) {
        const float *d = dout + (size_t)b * OC * P;
        for (int oc = 0; oc < OC; oc++) dbias[oc] += sum_floats(d + (size_t)oc * P, P);
        weight_gradient(dweight, d, in + (size_t)b * C * H * W, C, H, W, OC, K, col);
        if (din) {
            cn_sgemm(1, 0, CKK, P, OC, weight, CKK, d, P, 0, col, P);
            cn_col2im(din + (size_t)b * C * H * W, col, C, H, W, K);
        }
    }
}

/* ---- bf16: the same products on operands packed in pairs (gemm.h) ----
 * Forward: out = Wp [OC, Kp] * colp [Kp, P], with pairs of channels (c even, c+1) at each
 * (ky,kx) -- the input's channel pairs go through im2col as 32-bit words -- or, where that
 * makes fewer pairs (one channel, say), pairs of kernel columns (kx even, kx+1) of each
 * (c,ky), an odd K's last column with a zero weight -- from the input paired with its
 * right-hand neighbours. Weight gradient: dweight += dYp [OC, P/2] * rowsp [P/2, CKK], pairs
 * of positions, which for an even output width are horizontal neighbours: im2row in pairs from
 * that same paired input (other widths: im2row, then pairs of its rows). Input gradient: col =
 * W^T [CKK, OC/2] * dYq [OC/2, P], pairs of output channels, W^T read from W's row pairs. */

static int halves(int n) { return (n + 1) / 2; }

/* 1: the forward product pairs kernel columns, 0: channels. */
static int pairs_columns(int C, int K) { return C * K * halves(K) < halves(C) * K * K; }

static int forward_pairs(int C, int K)
{
    return pairs_columns(C, K) ? C * K * halves(K) : halves(C) * K * K;
}

size_t cn_conv2d_packed_words(const cn_conv_shape *s)
{
    UNPACK(s);
    size_t P = (size_t)(H - K + 1) * (W - K + 1), CKK = (size_t)C * K * K, HW = (size_t)H * W;
    size_t Pp = (size_t)halves((int)P), OCp = (size_t)halves(OC), Kp = (size_t)forward_pairs(C, K);
    size_t forward = (size_t)OC * Kp + (size_t)C * HW + Kp * P + CN_IM2ROW_SLACK;
    size_t backward = CKK * OCp + (size_t)C * HW + Pp * CKK + CN_IM2ROW_SLACK + (size_t)OC * Pp +
                      OCp * P;
    return forward > backward ? forward : backward;
}

/* wp [OC, Kp]: the weights in the forward product's pairs. */
static void pack_forward_weights(cn_bf16_pair *wp, const float *weight, int C, int OC, int K)
{
    int KK = K * K, Kp = forward_pairs(C, K);
    for (int oc = 0; oc < OC; oc++) {
        const float *w = weight + (size_t)oc * C * KK;
        if (!pairs_columns(C, K)) { /* [C/2, K*K]: (c, c+1) at each (ky,kx) */
            cn_bf16_pack_row_pairs(wp + (size_t)oc * Kp, w, C, KK, KK);
            continue;
        }
        for (int r = 0; r < C * K; r++) /* [C*K, (K+1)/2]: (kx, kx+1) of each (c,ky) */
            cn_bf16_pack_rows(wp + (size_t)oc * Kp + (size_t)r * halves(K), w + (size_t)r * K, 1,
                              K, K);
    }
}

void cn_conv2d_forward_bf16(float *out, const float *in, const float *weight, const float *bias,
                            int B, const cn_conv_shape *s, cn_bf16_pair *packed)
{
    UNPACK(s);
    int P = (H - K + 1) * (W - K + 1), Kp = forward_pairs(C, K);
    cn_bf16_pair *wp = packed, *plane = wp + (size_t)OC * Kp;
    cn_bf16_pair *colp = plane + (size_t)C * H * W;
    pack_forward_weights(wp, weight, C, OC, K);
    for (int b = 0; b < B; b++) {
        const float *x = in + (size_t)b * C * H * W;
        float *o = out + (size_t)b * OC * P;
        if (pairs_columns(C, K)) {
            cn_bf16_pair_columns(plane, x, C, H, W);
            cn_bf16_im2col_pairs(colp, plane, C, H, W, K);
        } else {
            cn_bf16_pack_row_pairs(plane, x, C, H * W, H * W);
            cn_im2col((float *)colp, (const float *)plane, halves(C), H, W, K); /* copies */
        }
        cn_gemm_bf16_rows_from(OC, P, Kp, wp, Kp, 1, colp, P, bias, o, P);
    }
}

/* rowsp [P/2, CKK]: the patches of positions 2q and 2q+1 in pairs, for one sample. */
static void position_pairs(cn_bf16_pair *rowsp, cn_bf16_pair *plane, const float *in, int C,
                           int H, int W, int K, float *col)
{
    int OW = W - K + 1, P = (H - K + 1) * OW, CKK = C * K * K;
    if (OW % 2 == 0) {
        cn_bf16_pair_columns(plane, in, C, H, W);
        cn_bf16_im2row_pairs(rowsp, plane, C, H, W, K);
    } else {
        cn_im2row(col, CKK, in, C, H, W, K);
        cn_bf16_pack_row_pairs(rowsp, col, P, CKK, CKK);
    }
}

void cn_conv2d_backward_bf16(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *weight, int B,
                             const cn_conv_shape *s, float *col, cn_bf16_pair *packed)
{
    UNPACK(s);
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K, Pp = halves(P), OCp = halves(OC);
    cn_bf16_pair *wtp = packed, *plane = wtp + (size_t)CKK * OCp;
    cn_bf16_pair *rowsp = plane + (size_t)C * H * W;
    cn_bf16_pair *dyp = rowsp + (size_t)Pp * CKK + CN_IM2ROW_SLACK, *dyq = dyp + (size_t)OC * Pp;
    if (din) cn_bf16_pack_row_pairs(wtp, weight, OC, CKK, CKK); /* read as W^T */
    for (int b = 0; b < B; b++) {
        const float *d = dout + (size_t)b * OC * P;
        for (int oc = 0; oc < OC; oc++) dbias[oc] += sum_floats(d + (size_t)oc * P, P);
        position_pairs(rowsp, plane, in + (size_t)b * C * H * W, C, H, W, K, col);
        cn_bf16_pack_rows(dyp, d, OC, P, P);
        cn_gemm_bf16(OC, CKK, Pp, dyp, Pp, 1, rowsp, CKK, 1, dweight, CKK);
        if (din) {
            cn_bf16_pack_row_pairs(dyq, d, OC, P, P);
            cn_gemm_bf16(CKK, P, OCp, wtp, 1, CKK, dyq, P, 0, col, P);
            cn_col2im(din + (size_t)b * C * H * W, col, C, H, W, K);
        }
    }
}

/* The gradients of a convolution whose output feeds only a max-pool (window = stride = S),
 * from the pool's gradient: each window has one nonzero, so only the picked positions (a
 * quarter of them with 2x2 windows) enter the products, and the pool's backward pass is not
 * needed. Without din (a first layer) the weight gradient reads the picked patches straight
 * from the input. With din, col holds, each part on a cache line of its own: the patch matrix
 * (im2row), its rows padded to whole lines, which then becomes the input gradient's patch rows
 * for row2im; the weights in rows padded alike; the picks sorted by position. */
static size_t whole_lines(size_t floats)
{
    return (floats + CN_LINE_FLOATS - 1) / CN_LINE_FLOATS * CN_LINE_FLOATS;
}

/* The row stride of the padded rows: whole lines, an odd number of them, so that a column of
 * rows (row2im reads them so) spreads over the cache's sets instead of a few of them. */
static int row_stride(int floats)
{
    return (int)((whole_lines((size_t)floats) / CN_LINE_FLOATS | 1) * CN_LINE_FLOATS);
}

_Static_assert(sizeof(int32_t) == sizeof(float), "the picks' scratch is counted in floats");

int cn_conv2d_pool_fusable(const cn_conv_shape *s, int S)
{
    return s->stride == 1 && s->pad == 0 && S >= 1 && s->OH >= S && s->OW >= S;
}

size_t cn_conv2d_pool_col_floats(const cn_conv_shape *s, int S)
{
    UNPACK(s);
    int OH = H - K + 1, OW = W - K + 1, Q = (OH / S) * (OW / S);
    size_t ld = (size_t)row_stride(C * K * K);
    return whole_lines((size_t)OH * OW * ld + CN_IM2ROW_SLACK) + (size_t)OC * ld +
           CN_PICK_SCRATCH_INTS(OH * OW, OC * Q);
}

void cn_conv2d_pool_backward(float *din, float *dweight, float *dbias, const float *dpool,
                             const int32_t *argmax, const float *in, const float *weight, int B,
                             const cn_conv_shape *s, int S, float *col)
{
    UNPACK(s);
    int OH = H - K + 1, OW = W - K + 1, CKK = C * K * K, Q = (OH / S) * (OW / S);
    int ld = row_stride(CKK);
    float *rows = col, *padded = rows + whole_lines((size_t)OH * OW * ld + CN_IM2ROW_SLACK);
    int32_t *picks = (int32_t *)(padded + (size_t)OC * ld);
    if (din)
        for (int oc = 0; oc < OC; oc++)
            memcpy(padded + (size_t)oc * ld, weight + (size_t)oc * CKK, CKK * sizeof *padded);
    for (int b = 0; b < B; b++) {
        const float *d = dpool + (size_t)b * OC * Q, *x = in + (size_t)b * C * H * W;
        const int32_t *at = argmax + (size_t)b * OC * Q;
        for (int oc = 0; oc < OC; oc++) dbias[oc] += sum_floats(d + (size_t)oc * Q, Q);
        if (!din) {
            cn_conv_picked_weight_gradient(OC, Q, d, at, x, C, H, W, K, dweight);
            continue;
        }
        cn_im2row(rows, ld, x, C, H, W, K);
        cn_picked_rows_weight_gradient(OC, Q, d, at, rows, CKK, ld, dweight);
        cn_picked_rows_input_gradient(OC, Q, d, at, padded, CKK, ld, OH * OW, rows, picks);
        cn_row2im(din + (size_t)b * C * H * W, rows, ld, C, H, W, K);
    }
}
