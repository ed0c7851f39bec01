/* executor.h — running a cn_model forward and backward on one batch in one workspace. A plan,
 * made once per model and batch size, cuts the layers into segments: a BatchNorm layer needs the
 * whole batch at once, every other run of layers goes through the batch a few samples at a time,
 * so that intermediate results nobody needs later (a conv output feeding a max-pool, say) live
 * in small buffers that stay in cache. Only what backward needs is kept for the whole batch.
 * Nothing here knows about replicas, threads or optimisers (trainer.c does). */
#ifndef CN_EXECUTOR_H
#define CN_EXECUTOR_H

#include "model.h"

typedef struct {
    int first, last; /* layers first..last */
    int batch_op;    /* 1: one BatchNorm layer, run on the whole batch at once */
    int chunk;       /* samples per pass through the segment */
} cn_segment;

typedef struct {
    const cn_model *m;
    int batch;
    int num_segments;
    cn_segment *segments;
    unsigned char *keep_out;  /* [L] 1: the layer's output is stored for the whole batch */
    unsigned char *keep_grad; /* [L] 1: so is the gradient of that output */
    int *rows;                /* [L] samples its transient buffers hold (its segment's chunk) */
    size_t col_floats;        /* im2col scratch */
    int bn_channels;          /* all BatchNorm channels */
} cn_plan;

typedef struct {
    float *input;      /* [batch, input size] */
    uint8_t *labels;   /* [batch] */
    float **out;       /* per layer: its output; flatten layers alias their input */
    float **grad;      /* per layer: gradient of its output */
    int32_t **argmax;  /* per layer: max-pool argmax [batch, out size], NULL for the others */
    float *bn_mean, *bn_invstd, *bn_var; /* [bn_channels] batch statistics of the last pass */
    float *col;        /* im2col scratch */
    float *dparams;    /* [num_params] gradient of the last backward pass */
    double *layer_forward, *layer_backward; /* per layer: seconds in training passes */
    void *block;
} cn_workspace;

int cn_plan_init(cn_plan *p, const cn_model *m, int batch);
void cn_plan_free(cn_plan *p);
int cn_workspace_init(cn_workspace *w, const cn_plan *p);
void cn_workspace_free(cn_workspace *w);

/* Runs count <= batch samples of w->input forward (training: batch statistics, timed). The
 * log-probabilities end in w->out[last], [count, classes]. */
void cn_forward(const cn_plan *p, cn_workspace *w, int count, int training);
/* After a training forward of the whole batch: w->dparams = gradient of the mean NLL of
 * w->labels. */
void cn_backward(const cn_plan *p, cn_workspace *w);

#endif /* CN_EXECUTOR_H */
