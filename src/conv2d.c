/* conv2d.c — 2D convolution (valid padding, stride 1, with bias) on top of cn_sgemm, one sample
 * at a time so the patch buffer stays in cache. Forward multiplies the weights by the
 * channel-major patch matrix (im2col); the weight gradient uses the position-major one (im2row)
 * when there are few output positions, so that it too is a plain product rather than many short
 * dot products; the input gradient goes back through col2im. No padding, stride or dilation:
 * the models here do not use them. */
#include <string.h>

#include "gemm.h"
#include "layers.h"

/* Below this many output positions the weight gradient is computed from im2row. */
#define CN_CONV_ROW_GRADIENT_POSITIONS 256

static void copy_floats(float *restrict dst, const float *restrict src, int n)
{
    for (int i = 0; i < n; i++) dst[i] = src[i];
}

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

/* col [C*K*K, OH*OW]: row (c,ky,kx) holds in[c, oy+ky, ox+kx] for every output position. */
static void im2col(float *col, const float *in, int C, int H, int W, int K)
{
    int OH = H - K + 1, OW = W - K + 1;
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                float *row = col + ((size_t)(c * K + ky) * K + kx) * OH * OW;
                for (int oy = 0; oy < OH; oy++)
                    copy_floats(row + oy * OW, in + ((size_t)c * H + oy + ky) * W + kx, OW);
            }
}

/* rows [OH*OW, C*K*K]: row (oy,ox) holds the patch in[c, oy+ky, ox+kx] in (c,ky,kx) order.
 * KC is K when it is a compile-time constant (the copies of K floats then unroll), 0 otherwise. */
static inline void im2row_k(float *rows, const float *in, int C, int H, int W, int K, int KC)
{
    if (KC) K = KC;
    int OH = H - K + 1, OW = W - K + 1, CKK = C * K * K;
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            float *row = rows + ((size_t)oy * OW + ox) * CKK;
            for (int c = 0; c < C; c++)
                for (int ky = 0; ky < K; ky++)
                    copy_floats(row + (c * K + ky) * K, in + ((size_t)c * H + oy + ky) * W + ox, K);
        }
}

static void im2row(float *rows, const float *in, int C, int H, int W, int K)
{
    if (K == 5)
        im2row_k(rows, in, C, H, W, K, 5);
    else if (K == 3)
        im2row_k(rows, in, C, H, W, K, 3);
    else
        im2row_k(rows, in, C, H, W, K, 0);
}

typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_unaligned __attribute__((vector_size(32), aligned(4), may_alias));

/* d[0..n) += r[0..n); eight at a time as one vector (the compiler would not vectorise this
 * short loop on its own). */
static inline void add_row(float *d, const float *r, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        *(v8f_unaligned *)(d + i) = *(v8f_unaligned *)(d + i) + *(const v8f_unaligned *)(r + i);
    for (; i < n; i++) d[i] += r[i];
}

/* The adjoint of im2col: din[c, oy+ky, ox+kx] += col[(c,ky,kx), (oy,ox)], din zeroed first.
 * OWC is the output width when it is a compile-time constant, 0 otherwise. */
static inline void col2im_w(float *din, const float *col, int C, int H, int W, int K, int OWC)
{
    int OH = H - K + 1, OW = OWC ? OWC : W - K + 1;
    memset(din, 0, (size_t)C * H * W * sizeof *din);
    /* kx outermost: the rows added one after another start at the same column, so a load
     * meets earlier stores at exactly their address (forwarded) rather than shifted by one. */
    for (int c = 0; c < C; c++)
        for (int kx = 0; kx < K; kx++)
            for (int ky = 0; ky < K; ky++) {
                const float *row = col + ((size_t)(c * K + ky) * K + kx) * OH * OW;
                for (int oy = 0; oy < OH; oy++)
                    add_row(din + ((size_t)c * H + oy + ky) * W + kx, row + oy * OW, OW);
            }
}

static void col2im(float *din, const float *col, int C, int H, int W, int K)
{
    if (W - K + 1 == 8)
        col2im_w(din, col, C, H, W, K, 8);
    else
        col2im_w(din, col, C, H, W, K, 0);
}

void cn_conv2d_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, int C, int H, int W, int OC, int K, float *col)
{
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    for (int b = 0; b < B; b++) {
        float *o = out + (size_t)b * OC * P;
        im2col(col, in + (size_t)b * C * H * W, C, H, W, K);
        for (int oc = 0; oc < OC; oc++)
            for (int p = 0; p < P; p++) o[(size_t)oc * P + p] = bias[oc];
        cn_sgemm(0, 0, OC, P, CKK, weight, CKK, col, P, 1, o, P);
    }
}

/* dweight [OC, CKK] += dout_b [OC, P] * patches^T, for one sample. */
static void weight_gradient(float *dweight, const float *dout_b, const float *in_b, int C, int H,
                            int W, int OC, int K, float *col)
{
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    if (P < CN_CONV_ROW_GRADIENT_POSITIONS) {
        im2row(col, in_b, C, H, W, K);
        cn_sgemm(0, 0, OC, CKK, P, dout_b, P, col, CKK, 1, dweight, CKK);
    } else {
        im2col(col, in_b, C, H, W, K);
        cn_sgemm(0, 1, OC, CKK, P, dout_b, P, col, P, 1, dweight, CKK);
    }
}

void cn_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, int C, int H, int W, int OC,
                        int K, float *col)
{
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    for (int b = 0; b < B; b++) {
        const float *d = dout + (size_t)b * OC * P;
        for (int oc = 0; oc < OC; oc++) dbias[oc] += sum_floats(d + (size_t)oc * P, P);
        weight_gradient(dweight, d, in + (size_t)b * C * H * W, C, H, W, OC, K, col);
        if (din) {
            cn_sgemm(1, 0, CKK, P, OC, weight, CKK, d, P, 0, col, P);
            col2im(din + (size_t)b * C * H * W, col, C, H, W, K);
        }
    }
}
