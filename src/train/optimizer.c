/* optimizer.c — the update rules of the trainer's optimisers, element by element over flat
 * arrays of the parameters' layout, written to compute what torch.optim does in fp32:
 *   sgd:   g = grad + wd * p (wd > 0);  buf = momentum * buf + g;
 *          p -= lr * (nesterov ? g + momentum * buf : buf)
 *   adamw: p *= 1 - lr * wd;  m = beta1 * m + (1 - beta1) * g;
 *          v = beta2 * v + (1 - beta2) * g * g;
 *          p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * with t the 1-based step. Candidates only: the trainer keeps them when every new weight is
 * finite. Also the optimisers' names. It does not split the work among threads, average
 * gradients or store anything. */
#include <math.h>
#include <string.h>

#include "train/optimizer.h"

static const char *const optimizer_names[] = {"sgd", "adamw"};
_Static_assert(sizeof optimizer_names / sizeof optimizer_names[0] == CN_OPTIMIZER_COUNT,
               "a name per optimiser");

const char *cn_optimizer_name(cn_optimizer o)
{
    return (unsigned)o < CN_OPTIMIZER_COUNT ? optimizer_names[o] : "unknown";
}

int cn_optimizer_from_name(const char *name, cn_optimizer *o)
{
    for (int i = 0; i < CN_OPTIMIZER_COUNT; i++)
        if (strcmp(name, optimizer_names[i]) == 0) {
            *o = (cn_optimizer)i;
            return 0;
        }
    return -1;
}

void cn_optim_rule_init(cn_optim_rule *r, const cn_train_config *cfg, float lr, int64_t step)
{
    *r = (cn_optim_rule){.kind = cfg->optimizer, .lr = lr * (float)cfg->num_replicas,
                         .momentum = cfg->momentum, .weight_decay = cfg->weight_decay,
                         .nesterov = cfg->nesterov};
    r->beta1 = cfg->beta1 > 0 ? cfg->beta1 : 0.9f;
    r->beta2 = cfg->beta2 > 0 ? cfg->beta2 : 0.999f;
    r->eps = cfg->eps > 0 ? cfg->eps : 1e-8f;
    /* as PyTorch: the corrections in double, from the step count */
    double t = (double)(step < 1 ? 1 : step);
    double bias1 = 1.0 - pow((double)r->beta1, t), bias2 = 1.0 - pow((double)r->beta2, t);
    r->step_size = (float)((double)r->lr / bias1);
    r->bias2_sqrt = (float)sqrt(bias2);
    r->decay = (float)(1.0 - (double)r->lr * (double)r->weight_decay);
}

static void sgd(const cn_optim_rule *r, const cn_optim_buffers *b, size_t n)
{
    float lr = r->lr, mu = r->momentum, wd = r->weight_decay;
    int nesterov = r->nesterov;
    const float *restrict p = b->params, *restrict state = b->state;
    float *restrict grad = b->grad, *restrict next = b->next_params;
    for (size_t j = 0; j < n; j++) {
        float g = grad[j];
        if (wd != 0) g = g + wd * p[j];
        float buf = mu * state[j] + g;
        grad[j] = buf;
        next[j] = p[j] - lr * (nesterov ? g + mu * buf : buf);
    }
}

static void adamw(const cn_optim_rule *r, const cn_optim_buffers *b, size_t n)
{
    float b1 = r->beta1, b2 = r->beta2, c1 = 1.0f - b1, c2 = 1.0f - b2;
    float bias2_sqrt = r->bias2_sqrt, eps = r->eps, decay = r->decay, step = r->step_size;
    const float *restrict p = b->params, *restrict state = b->state, *restrict state2 = b->state2;
    float *restrict grad = b->grad, *restrict next2 = b->next_state2;
    float *restrict next = b->next_params;
    for (size_t j = 0; j < n; j++) {
        float g = grad[j];
        float m = state[j] * b1 + g * c1;
        float v = state2[j] * b2 + c2 * g * g;
        float denom = sqrtf(v) / bias2_sqrt + eps;
        grad[j] = m;
        next2[j] = v;
        next[j] = p[j] * decay - step * (m / denom);
    }
}

void cn_optimizer_step(const cn_optim_rule *r, const cn_optim_buffers *b, size_t n)
{
    if (r->kind == CN_OPTIMIZER_ADAMW)
        adamw(r, b, n);
    else
        sgd(r, b, n);
}
