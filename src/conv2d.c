/* conv2d.c — 2D convolution (valid padding, stride 1, with bias) as im2col + GEMM, one sample
 * at a time so the column buffer stays small. No padding, stride or dilation options: the
 * models here do not use them. */
#include <string.h>

#include "gemm.h"
#include "layers.h"

/* col [C*K*K, OH*OW]: row (c,ky,kx) holds in[c, oy+ky, ox+kx] for every output position. */
static void im2col(float *col, const float *in, int C, int H, int W, int K)
{
    int OH = H - K + 1, OW = W - K + 1;
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                float *row = col + ((size_t)(c * K + ky) * K + kx) * OH * OW;
                for (int oy = 0; oy < OH; oy++)
                    memcpy(row + oy * OW, in + ((size_t)c * H + oy + ky) * W + kx,
                           (size_t)OW * sizeof *row);
            }
}

/* The adjoint of im2col: din[c, oy+ky, ox+kx] += col[(c,ky,kx), (oy,ox)], din zeroed first. */
static void col2im(float *din, const float *col, int C, int H, int W, int K)
{
    int OH = H - K + 1, OW = W - K + 1;
    memset(din, 0, (size_t)C * H * W * sizeof *din);
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                const float *row = col + ((size_t)(c * K + ky) * K + kx) * OH * OW;
                for (int oy = 0; oy < OH; oy++) {
                    float *d = din + ((size_t)c * H + oy + ky) * W + kx;
                    const float *r = row + oy * OW;
                    for (int ox = 0; ox < OW; ox++) d[ox] += r[ox];
                }
            }
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

void cn_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, int C, int H, int W, int OC,
                        int K, float *col)
{
    int P = (H - K + 1) * (W - K + 1), CKK = C * K * K;
    for (int b = 0; b < B; b++) {
        const float *d = dout + (size_t)b * OC * P;
        for (int oc = 0; oc < OC; oc++) {
            float s = 0;
            for (int p = 0; p < P; p++) s += d[(size_t)oc * P + p];
            dbias[oc] += s;
        }
        im2col(col, in + (size_t)b * C * H * W, C, H, W, K);
        cn_sgemm(0, 1, OC, CKK, P, d, P, col, P, 1, dweight, CKK);
        if (din) {
            cn_sgemm(1, 0, CKK, P, OC, weight, CKK, d, P, 0, col, P);
            col2im(din + (size_t)b * C * H * W, col, C, H, W, K);
        }
    }
}
