/* linear.c — fully connected layer y = x W^T + b over a batch, on top of cn_sgemm. No layout
 * other than PyTorch's weight [out, in]. */
#include "kernels/gemm.h"
#include "layers/layers.h"

void cn_linear_forward(float *out, const float *in, const float *weight, const float *bias,
                       int B, int I, int O)
{
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++) out[(size_t)b * O + o] = bias[o];
    cn_sgemm(0, 1, B, O, I, in, I, weight, I, 1, out, O);
}

void cn_linear_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int B, int I, int O)
{
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++) dbias[o] += dout[(size_t)b * O + o];
    cn_sgemm(1, 0, O, I, B, dout, O, in, I, 1, dweight, I);
    if (din) cn_sgemm(0, 0, B, I, O, dout, O, weight, I, 0, din, I);
}
