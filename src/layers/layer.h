/* layer.h — what a layer type is: one table (cn_layer_type) of facts and functions that the
 * model (model.c), the model files (model_file.c), the executor (executor.c) and the trainer
 * (trainer.c) iterate. Each layer type fills in its table in its own file under src/layers/ —
 * shape planning, its tensors with their PyTorch names and initialisation, forward, backward,
 * what backward needs kept, scratch, flops, running state and how replicas combine it — and
 * cn_layer_types (types.c) lists them. Nothing outside a layer's file asks which type a layer
 * is. Not part of the public header. */
#ifndef CN_LAYER_H
#define CN_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "cnnc.h"
#include "kernels/conv.h" /* cn_samples; gemm.h: cn_bf16_pair */

/* One sample's shape: channels, height, width; flat: a vector of c features (h = w = 1), as
 * after flatten, linear or global_avgpool, which [C,H,W] layers refuse as PyTorch does. */
typedef struct {
    int c, h, w, flat;
} cn_shape;

static inline size_t cn_shape_size(cn_shape s) { return (size_t)s.c * s.h * s.w; }

/* The settings of a layer, defaults resolved (cn_layer_spec with 0 meaning "the default"). */
typedef struct {
    int out;             /* conv2d output channels, linear output features */
    int kernel, stride, padding;
    int bias;            /* 1: the layer adds a bias */
    float p;             /* dropout: the probability of zeroing */
    float momentum, eps; /* batchnorm */
} cn_layer_args;

typedef struct cn_layer_type cn_layer_type;

/* One layer of a model: its type, settings, shapes and where its tensors are. */
typedef struct {
    const cn_layer_type *type;
    int index;             /* its position in the model */
    char name[64];         /* module name; at most 39 characters ("NAME.num_batches_tracked") */
    cn_layer_args args;
    cn_shape in, out;      /* per sample */
    size_t params, num_params;   /* its parameters in the model's params (and gradients) */
    size_t running, num_running; /* its running statistics in the model's running buffer */
    int counter;           /* its num_batches_tracked in the model's counters, or -1 */
    size_t report, num_report;   /* training: statistics of a batch that replicas exchange */
    size_t state, num_state;     /* training: what forward keeps for backward besides them */
} cn_layer;

/* Where a tensor of a layer lives: trainable parameters, running statistics, or a counter. */
typedef enum { CN_IN_PARAMS, CN_IN_RUNNING, CN_IN_COUNTER } cn_tensor_home;

typedef struct {
    const char *suffix;    /* "weight": the tensor is NAME.weight */
    cn_tensor_home home;
    int ndim;
    int64_t shape[4];
} cn_tensor_plan;

#define CN_MAX_LAYER_TENSORS 5

/* What a training step draws random numbers from (dropout): the same key gives the same draws
 * whatever thread or process runs the replica. */
typedef struct {
    uint64_t seed;
    int epoch, step, replica;
} cn_step_key;

/* One pass of one layer over n samples (forward or backward). Pointers are at the first of the
 * n samples; per-sample sizes are the layer's in and out shapes. */
typedef struct {
    const cn_layer *l;
    int n;                 /* samples in this pass */
    int first;             /* the index in the batch of the first of them */
    const float *x;        /* [n, in] */
    float *y;              /* [n, out] */
    const float *dy;       /* backward: [n, out], the gradient of y */
    float *dx;             /* backward: [n, in], the gradient of x, or NULL: nobody needs it */
    void *aux;             /* [n, aux_bytes] kept from forward to backward (max-pool picks) */
    float *report, *state; /* training: the layer's batch statistics (whole-batch layers) */
    const float *params;   /* the layer's parameters */
    float *dparams;        /* backward: where their gradients are added */
    const float *running;  /* evaluation: the layer's running statistics */
    float *col;            /* scratch: col_floats */
    cn_bf16_pair *packed;  /* scratch: packed_words, when bf16 */
    int training, bf16;
    const cn_step_key *key; /* training: the step being run */
    /* x and dy where no buffer holds them (x, dy NULL): made a sample at a time by the layer
     * that owns them (see by_sample); make NULL where they are in x and dy. */
    cn_samples made_x, made_dy;
    /* Training: where the pass shows y (forward) or dx (backward) as it writes them, to the
     * layer that reads them (take NULL: nowhere); taken: this layer's take saw every sample of
     * its x (forward) or of its dy (backward) that way. */
    cn_taker shown_y, shown_dx;
    int taken;
} cn_layer_pass;

/* Multiply-adds of one sample: forward, the parameters' gradients, the input's gradient. */
typedef struct {
    double forward, params_grad, input_grad;
} cn_layer_macs;

/* Flags: what backward reads and how the layer runs. */
enum {
    CN_KEEPS_INPUT = 1,   /* backward reads x */
    CN_KEEPS_OUTPUT = 2,  /* backward reads y */
    CN_WHOLE_BATCH = 4,   /* runs on the whole batch at once (batch statistics, or work per
                           * call that only pays over many samples) */
    CN_VIEW = 8,          /* y is x, reshaped: nothing runs, nothing is stored */
    CN_RANDOM = 16,       /* training draws random numbers (from the pass's key) */
    CN_FINAL = 32,        /* the model's last layer, whose output the loss reads */
};

/* Passes a layer can run together with those of the layers right after it (fuses). When both
 * are fused, the outputs of the layer and of every fused layer but the last, and their
 * gradients, are never read, and the executor keeps no buffers for them. */
enum {
    CN_FUSE_FORWARD = 1,  /* forward_fused writes the last fused layer's output */
    CN_FUSE_BACKWARD = 2, /* backward_fused reads the last fused layer's output gradient */
};

/* What a layer's passes stand for besides its own: the passes (CN_FUSE_*, 0: none) and how
 * many of the layers right after it they run. */
typedef struct {
    unsigned passes;
    int layers;
} cn_fusion;

/* What a layer does a sample at a time for the layers around it (cn_layer_type.by_sample). */
enum {
    CN_MAKES_OUTPUT = 1,          /* makes its output (the last fused layer's), both passes */
    CN_MAKES_INPUT_GRADIENT = 2,  /* makes its input gradient, once its backward has run */
    CN_TAKES_INPUT = 4,           /* takes its input as the layer before writes it (forward) */
    CN_TAKES_OUTPUT_GRADIENT = 8, /* takes its output gradient (the last fused layer's) as the
                                   * layer after writes it (backward) */
};

/* The most layers one layer's passes run besides its own (a BatchNorm, its relu, a max-pool). */
#define CN_MAX_FUSED 2

struct cn_layer_type {
    const char *kind;        /* the model file's word: "conv2d" */
    unsigned flags;
    /* Flags a layer of this type takes on its shape, added to flags. NULL: none. */
    unsigned (*shape_flags)(const cn_layer *l);
    const char *keys;        /* the model file keys it takes, space-separated */
    const char *required;    /* those that must be given */
    /* Resolves s into l->args and sets l->out from l->in; -1 with the reason in err (no layer
     * prefix: the caller adds it). */
    int (*plan)(cn_layer *l, const cn_layer_spec *s, cn_error *err);
    /* Writes its tensors in order (parameters first) into t[0..CN_MAX_LAYER_TENSORS); returns
     * how many. NULL: none. Parameters and running statistics take consecutive places. */
    int (*tensors)(const cn_layer *l, cn_tensor_plan *t);
    /* PyTorch's default initialisation of params [num_params] and running [num_running]. */
    void (*init)(const cn_layer *l, float *params, float *running, cn_rng *rng);
    /* Training: the floats of a batch's statistics exchanged between replicas, and those kept
     * for backward only. NULL: none. */
    void (*batch_state)(const cn_layer *l, size_t *report, size_t *state);
    /* Bytes per sample of what forward keeps for backward (aux). NULL: none. */
    size_t (*aux_bytes)(const cn_layer *l);
    /* Scratch of one pass: floats of col, words of packed (bf16 only). NULL: none. fused: the
     * next layer when backward runs fused with it (see fuses), else NULL. */
    void (*scratch)(const cn_layer *l, const cn_layer *fused, int bf16, size_t *col,
                    size_t *packed);
    /* Multiply-adds per sample (fused: as the fused backward computes them). NULL: none. */
    void (*macs)(const cn_layer *l, const cn_layer *fused, cn_layer_macs *m);
    void (*forward)(const cn_layer_pass *p);
    void (*backward)(const cn_layer_pass *p); /* NULL: nothing (a view) */
    /* Which of this layer's passes can stand for their own and those of the layers after it,
     * next[0 .. avail) (avail >= 1), and of how many of them: forward_fused and backward_fused
     * then run next[0 .. count) too (count: the fusion's layers), whose passes are not run.
     * bf16: the products are bf16 (cn_precision); the passes may depend on it, the count of
     * layers may not (the executor plans which layers run on the whole batch without it).
     * NULL: none. */
    cn_fusion (*fuses)(const cn_layer *l, const cn_layer *next, int avail, int bf16);
    void (*forward_fused)(const cn_layer_pass *p, const cn_layer_pass *next, int count);
    void (*backward_fused)(const cn_layer_pass *p, const cn_layer_pass *next, int count);
    /* The passes with a relu before the layer inside them: x is read as max(x, 0), and dx is
     * the relu's input gradient (gated on x > 0). A relu layer before one that has them fuses
     * with it (relu.c). NULL: none. */
    void (*forward_rectified)(const cn_layer_pass *p);
    void (*backward_rectified)(const cn_layer_pass *p);
    /* Whether its passes take x and dy made a sample at a time (cn_layer_pass.made_x, made_dy)
     * instead of from buffers, and whether they show y and dx as they write them (shown_y,
     * shown_dx; on the whole batch, in sample order). NULL: never. */
    int (*takes_made)(const cn_layer *l, int bf16);
    int (*shows)(const cn_layer *l, int bf16);
    /* What the layer (with next[0 .. count), the layers its passes run) does a sample at a time
     * for the layers around it (CN_MAKES_*, CN_TAKES_*; NULL: nothing). For what it makes, the
     * executor leaves the buffer out, runs forward with the last fused output NULL (only the
     * statistics) and backward with dx NULL (only the parameters' gradients and what
     * make_input_gradient needs), and gives the reading layer a cn_samples that calls the make
     * functions with the passes of the same samples: sample b's output, or its input
     * gradient, into dst, the same bits as the passes would write. What it takes, the layer
     * that writes it shows to the take functions, sample b's values (forward: x; backward: the
     * last fused layer's dy) in sample order from 0, before this layer's pass runs with taken
     * set: the same sums the pass would make. */
    unsigned (*by_sample)(const cn_layer *l, const cn_layer *next, int count);
    void (*make_output)(const cn_layer_pass *p, const cn_layer_pass *next, int count, int b,
                        float *dst);
    void (*make_input_gradient)(const cn_layer_pass *p, const cn_layer_pass *next, int count,
                                int b, float *dst);
    void (*take_input)(const cn_layer_pass *p, const cn_layer_pass *next, int count, int b,
                       const float *x);
    void (*take_output_gradient)(const cn_layer_pass *p, const cn_layer_pass *next, int count,
                                 int b, const float *dy);
    /* After a step: running statistics from every replica's report ([R] of them, each at this
     * layer's place), in replica order; counter += 1. NULL: none. */
    void (*update_running)(const cn_layer *l, float *running, int64_t *counter,
                           const float *const *reports, int R);
    /* With several processes, made where the replica ran: out[num_report] (may be report)
     * gets this replica's addends of update_running, laid out as running (num_running ==
     * num_report), so that update_running over R replicas equals, bit for bit, the sum of the
     * R replicas' out in replica order from 0, divided by R, and counter += 1. NULL exactly
     * when update_running is. */
    void (*running_share)(const cn_layer *l, const float *running, const float *report,
                          float *out);
    /* Appends (cn_appendf) the layer's keys in the canonical model file, after the kind and
     * name=: " out=10 kernel=5", optional keys only where they differ from the defaults. NULL:
     * no keys. */
    void (*describe)(const cn_layer *l, char *line, size_t cap);
};

/* The table of kind k (cn_layer_kind), or NULL for a value that is not one. */
const cn_layer_type *cn_layer_type_of(int kind);
/* The table whose model file word is word, or NULL; *kind gets its cn_layer_kind. */
const cn_layer_type *cn_layer_type_named(const char *word, int *kind);

/* The layer types (one file each under src/layers/). */
extern const cn_layer_type cn_conv2d_type, cn_maxpool2d_type, cn_relu_type,
    cn_batchnorm2d_type, cn_flatten_type, cn_linear_type, cn_log_softmax_type,
    cn_avgpool2d_type, cn_global_avgpool_type, cn_dropout_type, cn_batchnorm1d_type;

/* Helpers the layer files share (types.c). Plan checks: -1 with the reason in err. */
int cn_need_planes(const cn_layer *l, cn_error *err); /* a [C,H,W] input, not a flat one */
int cn_need_flat(const cn_layer *l, cn_error *err);   /* a flat input */
int cn_window_fits(const cn_layer *l, int kernel, int padding, cn_error *err);
/* Appends to the NUL-terminated text in line[cap] what printf would write (cut at cap). */
void cn_appendf(char *line, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* num = the shortest of %g and %.9g that reads back as v. */
void cn_format_float(char num[32], float v);
/* Appends " key=V", V as cn_format_float writes v. */
void cn_append_float(char *line, size_t cap, const char *key, float v);
/* PyTorch's default for conv and linear: uniform in +-1/sqrt(fan_in), the weight, then the bias. */
void cn_init_fan_in(float *params, size_t num_weight, size_t num_bias, size_t fan_in,
                    cn_rng *rng);

#endif /* CN_LAYER_H */
