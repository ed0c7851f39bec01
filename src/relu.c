/* relu.c — the rectifier, elementwise. Backward is gated on the output (> 0), which is what
 * PyTorch does; the kink at 0 gets gradient 0. */
#include "layers.h"

void cn_relu_forward(float *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void cn_relu_backward(float *din, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}
