/* maxpool2d.c — max-pooling with window = stride = S (floor), remembering where each maximum
 * came from so backward routes the gradient there. Ties go to the first maximum in scan order,
 * as in PyTorch. The common 2x2 window has its own loop. No padding, dilation or overlapping
 * windows. */
#include <string.h>

#include "layers.h"

/* One plane, window 2, without branches: each pair keeps its first element on a tie and the
 * top pair wins a tie with the bottom one, which is the first maximum in scan order. */
static void pool2_plane(float *restrict y, int32_t *restrict where, const float *restrict x,
                        int W, int OH, int OW)
{
    for (int oy = 0; oy < OH; oy++) {
        const float *r0 = x + (size_t)(2 * oy) * W, *r1 = r0 + W;
        for (int ox = 0; ox < OW; ox++) {
            float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
            float top = b > a ? b : a, bottom = d > c ? d : c;
            int top_at = b > a, bottom_at = W + (d > c);
            int pick_bottom = bottom > top;
            y[oy * OW + ox] = pick_bottom ? bottom : top;
            where[oy * OW + ox] = 2 * oy * W + 2 * ox + (pick_bottom ? bottom_at : top_at);
        }
    }
}

static void pool_plane(float *y, int32_t *where, const float *x, int W, int OH, int OW, int S)
{
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            int best = oy * S * W + ox * S;
            for (int dy = 0; dy < S; dy++)
                for (int dx = 0; dx < S; dx++) {
                    int at = (oy * S + dy) * W + ox * S + dx;
                    if (x[at] > x[best]) best = at;
                }
            y[oy * OW + ox] = x[best];
            where[oy * OW + ox] = best;
        }
}

void cn_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int B, int C, int H,
                          int W, int S)
{
    int OH = H / S, OW = W / S;
    for (int plane = 0; plane < B * C; plane++) {
        const float *x = in + (size_t)plane * H * W;
        float *y = out + (size_t)plane * OH * OW;
        int32_t *where = argmax + (size_t)plane * OH * OW;
        if (S == 2)
            pool2_plane(y, where, x, W, OH, OW);
        else
            pool_plane(y, where, x, W, OH, OW, S);
    }
}

void cn_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int B, int C,
                           int H, int W, int S)
{
    int OHW = (H / S) * (W / S);
    memset(din, 0, (size_t)B * C * H * W * sizeof *din);
    for (int plane = 0; plane < B * C; plane++) {
        float *dx = din + (size_t)plane * H * W;
        const float *dy = dout + (size_t)plane * OHW;
        const int32_t *where = argmax + (size_t)plane * OHW;
        for (int i = 0; i < OHW; i++) dx[where[i]] += dy[i];
    }
}
