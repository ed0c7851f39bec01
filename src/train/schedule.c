/* schedule.c — learning-rate schedules as PyTorch's torch.optim.lr_scheduler computes them, per
 * optimiser step: StepLR, CosineAnnealingLR (eta_min 0) and OneCycleLR with its defaults
 * (pct_start 0.3, cosine annealing, div_factor 25, final_div_factor 1e4, two phases), each
 * optionally after a LinearLR warmup as SequentialLR chains them. Closed forms, so any step's
 * rate comes without running the ones before. It does not apply the rate to an optimiser, nor
 * schedule momentum (OneCycleLR's cycle_momentum is left out). Also the schedules' names. */
#include <math.h>
#include <string.h>

#include "cnnc.h"

#define PI 3.14159265358979323846

static const char *const kind_names[] = {"constant", "step", "cosine", "onecycle"};

const char *cn_lr_kind_name(cn_lr_kind k)
{
    return (unsigned)k <= CN_LR_ONECYCLE ? kind_names[k] : "unknown";
}

int cn_lr_kind_from_name(const char *name, cn_lr_kind *k)
{
    for (int i = 0; i <= CN_LR_ONECYCLE; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *k = (cn_lr_kind)i;
            return 0;
        }
    return -1;
}

int cn_lr_schedule_check(const cn_lr_schedule *s, cn_error *err)
{
    if (s->kind < CN_LR_CONSTANT || s->kind > CN_LR_ONECYCLE)
        return cn_fail(err, "learning-rate schedule: unknown kind %d", (int)s->kind);
    if (s->warmup_steps < 0) return cn_fail(err, "learning-rate schedule: warmup steps below 0");
    if (!(s->warmup_start >= 0 && s->warmup_start <= 1))
        return cn_fail(err, "learning-rate schedule: warmup start factor outside [0, 1]");
    if (s->kind == CN_LR_STEP && (s->step_size < 1 || !(s->gamma > 0) || !isfinite(s->gamma)))
        return cn_fail(err, "learning-rate schedule: step needs a step size >= 1 and gamma > 0");
    if ((s->kind == CN_LR_COSINE || s->kind == CN_LR_ONECYCLE) &&
        s->total_steps - s->warmup_steps < 2)
        return cn_fail(err, "learning-rate schedule: %s needs at least 2 steps after the warmup",
                       s->kind == CN_LR_COSINE ? "cosine" : "onecycle");
    return 0;
}

/* OneCycleLR's annealing from start to end, pct of the way (cosine). */
static double anneal(double start, double end, double pct)
{
    return end + (start - end) / 2.0 * (cos(PI * pct) + 1.0);
}

/* OneCycleLR at step t of total: up from base/25 to base over the first 30%, then down to
 * base/25/1e4; steps past the end keep the last rate. */
static double one_cycle(double base, long t, long total)
{
    double initial = base / 25.0, last = initial / 1e4, up_end = 0.3 * (double)total - 1.0;
    if (t > total - 1) t = total - 1;
    if ((double)t <= up_end) return anneal(initial, base, (double)t / up_end);
    return anneal(base, last, ((double)t - up_end) / ((double)(total - 1) - up_end));
}

/* The main schedule at step t after the warmup. */
static double main_rate(const cn_lr_schedule *s, double base, long t)
{
    long total = s->total_steps - s->warmup_steps;
    switch (s->kind) {
    case CN_LR_STEP: return base * pow((double)s->gamma, (double)(t / s->step_size));
    case CN_LR_COSINE: return base * (1.0 + cos(PI * (double)t / (double)total)) / 2.0;
    case CN_LR_ONECYCLE: return one_cycle(base, t, total);
    default: return base;
    }
}

float cn_lr_at(const cn_lr_schedule *s, float base, long step)
{
    if (step < 0) step = 0;
    if (step >= s->warmup_steps) return (float)main_rate(s, base, step - s->warmup_steps);
    double f = s->warmup_start > 0 ? s->warmup_start : 1.0 / 3.0;
    double ramp = f + (1.0 - f) * (double)step / (double)s->warmup_steps;
    return (float)(main_rate(s, base, 0) * ramp);
}
