/* optimizer.h — the update rules of the trainer's optimisers over flat float arrays (see
 * optimizer.c). Nothing about replicas, threads or checkpoints here. */
#ifndef CN_OPTIMIZER_H
#define CN_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "cnnc.h"

/* One step's constants, from a config with its defaults filled in. */
typedef struct {
    cn_optimizer kind;
    float lr;              /* the step's: learning_rate * num_replicas */
    float momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    float step_size;       /* adamw: lr / (1 - beta1^step) */
    float bias2_sqrt;      /* adamw: sqrt(1 - beta2^step) */
    float decay;           /* adamw: 1 - lr * weight_decay */
} cn_optim_rule;

/* The rule of step number step (1-based, AdamW's bias correction) of a run configured with cfg
 * at learning rate lr per replica. */
void cn_optim_rule_init(cn_optim_rule *r, const cn_train_config *cfg, float lr, int64_t step);

/* The buffers of one step over n parameters, all [n] in the parameters' layout. */
typedef struct {
    const float *params;   /* the weights now */
    float *grad;           /* in: the averaged gradient; out: the new first buffer */
    const float *state;    /* sgd: momentum; adamw: exp_avg */
    const float *state2;   /* adamw: exp_avg_sq; NULL for sgd */
    float *next_state2;    /* adamw: the new exp_avg_sq; NULL for sgd */
    float *next_params;    /* the new weights */
} cn_optim_buffers;

/* Computes the candidates of one step (nothing it reads is written but grad). */
void cn_optimizer_step(const cn_optim_rule *r, const cn_optim_buffers *b, size_t n);

#endif
