/* executor.h — running a cn_model forward and backward on one batch in one workspace. A plan,
 * made once per model and batch size, cuts the layers into segments: a BatchNorm layer needs the
 * whole batch at once, every other run of layers goes through the batch a few samples at a time,
 * so that intermediate results nobody needs later (a conv output feeding a max-pool, say) live
 * in small buffers that stay in cache. Only what backward needs is kept for the whole batch,
 * and not even that where the layer that reads a tensor takes it made a sample at a time by the
 * layer that owns it (BatchNorm's normalised output and input gradient for the convolutions
 * beside it: layer.h, by_sample), so that it never goes through memory; BatchNorm also sums its
 * statistics from what Winograd's convolutions write, as they write it. What each layer needs
 * comes from its type's table (layer.h); nothing here asks which type a layer is. Nothing here
 * knows about replicas, threads or optimisers (trainer.c does). */
#ifndef CN_EXECUTOR_H
#define CN_EXECUTOR_H

#include "kernels/gemm.h"
#include "model/model.h"

/* Transient floats per segment pass (a chunk of the batch): small enough to stay in a core's L2
 * cache. Also the most parameters a layer that runs in chunks may have: every chunk sums its own
 * gradient, to be added in chunk order, and gradients larger than this cost more to write and
 * add than the chunks save, so a layer with more runs on the whole batch. */
#define CN_CHUNK_FLOATS 32768

typedef struct {
    int first, last; /* layers first..last */
    int batch_op;    /* 1: one whole-batch layer (BatchNorm), run on the whole batch at once */
    int chunk;       /* samples per pass through the segment */
    int num_chunks;  /* passes over the whole batch */
    size_t param_begin, param_end; /* the parameters its layers own */
    size_t partial;  /* where its per-chunk gradients start in cn_workspace.partials */
} cn_segment;

typedef struct {
    const cn_model *m;
    int batch;
    int num_segments;
    cn_segment *segments;
    unsigned char *keep_out;  /* [L] 1: the layer's output is stored for the whole batch */
    unsigned char *keep_grad; /* [L] 1: so is the gradient of that output */
    cn_fusion *fusion;        /* [L] the passes of layers after it that its own run */
    int *made_x, *made_dy;    /* [L] the layer that makes the layer's input (its output
                               * gradient) a sample at a time where no buffer holds it
                               * (cn_layer_type.by_sample), or -1 */
    int *shown_y, *shown_dx;  /* [L] the layer that takes the layer's output (its input
                               * gradient) as the layer writes it, or -1 */
    int *rows;                /* [L] samples its transient buffers hold (its segment's chunk) */
    size_t col_floats;        /* patch scratch */
    int bf16;                 /* 1: the convolutions' products in bf16 (CN_PRECISION_BF16) */
    size_t packed_words;      /* their packed operands, when bf16 */
    size_t partial_floats;    /* per-chunk gradients of the segments with several chunks */
    float label_smoothing;    /* of the loss backward starts from (0 after cn_plan_init) */
} cn_plan;

typedef struct {
    float *input;      /* [batch, input size] */
    uint8_t *labels;   /* [batch] */
    float **out;       /* per layer: its output; views alias their input */
    float **grad;      /* per layer: gradient of its output */
    void **aux;        /* per layer: what forward keeps for backward [batch, aux bytes], or NULL */
    float *report;     /* [m->num_report] batch statistics of the last training pass */
    float *state;      /* [m->num_state] what else forward kept for backward */
    float *col;        /* patch scratch */
    cn_bf16_pair *packed; /* [packed_words] bf16 operands of a convolution (bf16 plans) */
    float *dparams;    /* [num_params] gradient of the last backward pass */
    float *partials;   /* [partial_floats] each chunk's share of dparams, summed in chunk order */
    double *layer_forward, *layer_backward; /* per layer: seconds in training passes */
    cn_step_key key;   /* the training step being run (the trainer sets it) */
    void *block;
} cn_workspace;

int cn_plan_init(cn_plan *p, const cn_model *m, int batch, cn_precision precision);
void cn_plan_free(cn_plan *p);
int cn_workspace_init(cn_workspace *w, const cn_plan *p);
void cn_workspace_free(cn_workspace *w);

/* Runs count <= batch samples of w->input forward (training: batch statistics, timed). The
 * log-probabilities end in w->out[last], [count, classes]. */
void cn_forward(const cn_plan *p, cn_workspace *w, int count, int training);
/* After a training forward of the whole batch: w->dparams = gradient of the mean NLL of
 * w->labels (smoothed by p->label_smoothing). The gradient of a segment with several chunks is
 * summed per chunk, and the chunk sums are added in chunk order, so the chunks may run on
 * different threads. */
void cn_backward(const cn_plan *p, cn_workspace *w);

/* The same passes piece by piece, for running the chunks of one batch on several threads.
 * w holds the batch (inputs, kept tensors, gradients); scratch holds the transient buffers and
 * the patch scratch of the thread that runs the chunk (w itself when one thread runs it all);
 * timings go to scratch. Chunks of one segment are independent; segments run in order, and
 * cn_backward_segment_done must follow the last backward chunk of a segment. */
int cn_segment_chunks(const cn_plan *p, int seg, int count);
void cn_forward_chunk(const cn_plan *p, cn_workspace *w, cn_workspace *scratch, int seg,
                      int chunk, int count, int training);
void cn_backward_start(const cn_plan *p, cn_workspace *w);
void cn_backward_chunk(const cn_plan *p, cn_workspace *w, cn_workspace *scratch, int seg,
                       int chunk);
void cn_backward_segment_done(const cn_plan *p, cn_workspace *w, int seg);

#endif /* CN_EXECUTOR_H */
