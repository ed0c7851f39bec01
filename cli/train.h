/* train.h — the state `cnnc train` passes between its parsing, driving (train.c) and reporting
 * (train_report.c) parts. Plain structs and the report functions; no logic lives here. */
#ifndef CNNC_CLI_TRAIN_H
#define CNNC_CLI_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "cnnc.h"
#include "dist.h"
#include "progress.h"

/* What the flags asked for; fixed once parsed. */
typedef struct {
    const char *data_dir;
    const char *data_format;  /* --data-format: "auto", "idx", "cifar10" or "folder" */
    const char *classes_file; /* --classes FILE; NULL: what the data says */
    int batch_size;      /* per replica */
    float learning_rate; /* per replica; the library scales it by num_cores */
    float momentum;
    float label_smoothing; /* of the training loss, 0 <= A < 1 */
    int num_epochs;
    int num_cores;       /* replicas */
    int threads;
    int log_steps;
    int metrics_debug;
    uint64_t seed;
    cn_precision precision;
    int train_samples;   /* 0: all */
    int test_samples;    /* 0: all */
    const char *save_path;    /* NULL: not saved */
    const char *result_image; /* NULL: no picture */
    const char *metrics_path; /* NULL: no metrics file */
    const char *checkpoint_dir; /* NULL: no checkpoints */
    int save_every;           /* epochs between checkpoints (the last epoch is always saved) */
    int keep;                 /* newest checkpoints kept in checkpoint_dir */
    const char *resume;       /* checkpoint FILE or DIR to continue; NULL: a fresh run */
    uint64_t given;           /* TRAIN_GIVEN_* bits: flags given on the command line */
    const char *plot_path;    /* NULL: no training curves */
    progress_level verbosity; /* PROGRESS_QUIET, _NORMAL or _VERBOSE */
    int mpi_timeout;          /* seconds an exchange waits for another process; 0: for ever */
    const char *model_path;   /* --model FILE; NULL: the seed's network */
    int val_samples;          /* the last of the training samples used, held out; 0: none */
    int keep_best;            /* --keep-best: DIR/best.safetensors after each best epoch */
    int resize;               /* --resize: folder images scaled to the model's size */
    int test_percent;         /* --test-percent: DIR/CLASS/IMAGE split by a share; 0: none */
    /* --augment: random crops and flips of the training samples; {0, 0}: none */
    cn_augment augment;
    cn_optimizer optimizer;   /* --optimizer: sgd or adamw */
    int nesterov;             /* --nesterov: sgd with momentum only */
    float weight_decay;       /* --weight-decay, >= 0 */
    cn_lr_kind lr_schedule;   /* --lr-schedule */
    int warmup_epochs;        /* --warmup-epochs: of linear warmup, 0: none */
    int lr_step_epochs;       /* --lr-step-epochs: step's interval; 0: not set */
    float lr_gamma;           /* --lr-gamma: step's factor */
} train_settings;

/* Flags whose presence matters: on resume a given flag wins over what the checkpoint says; a
 * given --threads above what the work can use is noted. */
#define TRAIN_GIVEN_BATCH_SIZE      (UINT64_C(1) << 0)
#define TRAIN_GIVEN_LEARNING_RATE   (UINT64_C(1) << 1)
#define TRAIN_GIVEN_MOMENTUM        (UINT64_C(1) << 2)
#define TRAIN_GIVEN_NUM_CORES       (UINT64_C(1) << 3)
#define TRAIN_GIVEN_SEED            (UINT64_C(1) << 4)
#define TRAIN_GIVEN_TRAIN_SAMPLES   (UINT64_C(1) << 5)
#define TRAIN_GIVEN_SAVE_EVERY      (UINT64_C(1) << 6)
#define TRAIN_GIVEN_KEEP            (UINT64_C(1) << 7)
#define TRAIN_GIVEN_PRECISION       (UINT64_C(1) << 8)
#define TRAIN_GIVEN_NUM_EPOCHS      (UINT64_C(1) << 9)
#define TRAIN_GIVEN_TEST_SAMPLES    (UINT64_C(1) << 10)
#define TRAIN_GIVEN_LOG_STEPS       (UINT64_C(1) << 11)
#define TRAIN_GIVEN_DATA_DIR        (UINT64_C(1) << 12)
#define TRAIN_GIVEN_SAVE            (UINT64_C(1) << 13)
#define TRAIN_GIVEN_METRICS_FILE    (UINT64_C(1) << 14)
#define TRAIN_GIVEN_RESULT_IMAGE    (UINT64_C(1) << 15)
#define TRAIN_GIVEN_PLOT            (UINT64_C(1) << 16)
#define TRAIN_GIVEN_THREADS         (UINT64_C(1) << 17)
#define TRAIN_GIVEN_DATA_FORMAT     (UINT64_C(1) << 18)
#define TRAIN_GIVEN_CLASSES         (UINT64_C(1) << 19)
#define TRAIN_GIVEN_LABEL_SMOOTHING (UINT64_C(1) << 20)
#define TRAIN_GIVEN_OPTIMIZER       (UINT64_C(1) << 21)
#define TRAIN_GIVEN_NESTEROV        (UINT64_C(1) << 22)
#define TRAIN_GIVEN_WEIGHT_DECAY    (UINT64_C(1) << 23)
#define TRAIN_GIVEN_LR_SCHEDULE     (UINT64_C(1) << 24)
#define TRAIN_GIVEN_WARMUP_EPOCHS   (UINT64_C(1) << 25)
#define TRAIN_GIVEN_LR_STEP_EPOCHS  (UINT64_C(1) << 26)
#define TRAIN_GIVEN_LR_GAMMA        (UINT64_C(1) << 27)
#define TRAIN_GIVEN_AUGMENT         (UINT64_C(1) << 28)
#define TRAIN_GIVEN_VAL_SAMPLES     (UINT64_C(1) << 29)
#define TRAIN_GIVEN_KEEP_BEST       (UINT64_C(1) << 30)
#define TRAIN_GIVEN_RESIZE          (UINT64_C(1) << 31)
#define TRAIN_GIVEN_TEST_PERCENT    (UINT64_C(1) << 32)

/* The ranges of the flags that take counts, shared by the parser and the checkpoint reader. */
#define TRAIN_MAX_EPOCHS 100000 /* --num-epochs, --save-every and --keep */

/* What one training run owns. */
typedef struct {
    cli_dist *dist;       /* the processes of the run (one, unless under mpirun or srun) */
    cn_dataset train, test;
    cn_model *model;
    cn_trainer *trainer;
    FILE *metrics;        /* open metrics file or NULL */
    uint8_t *predictions; /* [test.count], from the latest evaluation */
    int steps;            /* optimiser steps per epoch */
    cn_train_config config;
    int threads;          /* the threads that can have work: --threads or fewer */
    cn_epoch_position position; /* where training stands */
    /* Checkpoints and resume (train_checkpoint.c). */
    cn_train_state state;         /* settings and position written into checkpoints */
    char *resume_path;            /* the checkpoint file resumed from, or NULL */
    cn_safetensors *resume_file;  /* that file, read, until its tensors are restored */
    int checkpoint_fd;            /* the locked checkpoint folder, or -1 */
    cn_epoch_position saved;      /* the newest position written or resumed from */
    int have_saved;
    int planned_epochs;           /* the resumed run's recorded --num-epochs; 0: none */
    char *adopted[16];            /* copies of the paths a resumed run took from its checkpoint */
    progress progress;    /* what the terminal or log shows */
    cli_epoch_list history; /* the epochs so far, for the curves */
    cn_dataset val;       /* --val-samples: a view of the end of train's arrays (not owned) */
    double best_val_accuracy; /* the highest validation accuracy so far; -1: none yet */
    int best_epoch;           /* its epoch; 0: none yet */
} train_run;

/* The measurements of one epoch. */
typedef struct epoch_report {
    int epoch;
    int num_epochs;        /* of the run */
    float train_loss;      /* mean step loss */
    double train_accuracy; /* percent of the epoch's training samples the model got right */
    double test_loss;      /* mean NLL over the test images */
    double test_accuracy;  /* percent */
    double train_seconds;  /* the training part of the epoch */
    double eval_seconds;   /* the test pass */
    long train_samples;    /* the epoch's training samples, those before a resume included */
    long timed_samples;    /* those trained in train_seconds (fewer after a resume) */
    int test_samples;
    cn_phase_times phases; /* this epoch only */
    int val_samples;       /* 0: no validation split */
    double val_loss;       /* mean NLL over the validation images */
    double val_accuracy;   /* percent */
    float learning_rate;   /* per replica, of the epoch's last step */
    int64_t exchange_bytes; /* sent plus received by this process in one step; 0 alone */
} epoch_report;

/* "cnnc 0.1.0: 50 epochs of 58 steps, ..." — the settings a run uses, printed once, in lines
 * that fit 80 columns. */
void print_settings_line(const train_settings *s, const train_run *run);
/* The epoch's summary line (within 80 columns) and, with metrics_debug, where its time went. */
void print_epoch_report(const epoch_report *r, int metrics_debug);
/* One JSON object on one line, flushed; returns -1 (errno set) when writing failed. */
int write_metrics_line(FILE *f, const epoch_report *r);

/* The settings that shape a run besides its math (train_run_settings.c), recorded in every
 * checkpoint: RUN_SETTINGS_COUNT key/value pairs into meta (2 * RUN_SETTINGS_COUNT pointers),
 * numbers written into text; the paths point into s. */
#define RUN_SETTINGS_COUNT 16
#define RUN_VALUE_MAX 24
void run_settings_record(const train_settings *s, char text[][RUN_VALUE_MAX], const char **meta);
/* Takes the recorded settings of the --resume checkpoint f (at path) that the command line did
 * not give; a file from before they were recorded keeps the defaults. CLI_FAILURE after a
 * message when a value is damaged. */
int run_settings_adopt(train_settings *s, train_run *run, const cn_safetensors *f,
                       const char *path);
/* The run's planned length against what the checkpoint has done: refuses a --num-epochs at or
 * below it (CLI_USAGE) and a complete run without one. */
int run_settings_check_epochs(const train_settings *s, int done, const char *path);
/* "Resuming from ...", and the one line that says a run was made longer or shorter. */
void run_settings_print_resume(const train_settings *s, const train_run *run);
void run_settings_free(train_run *run);
/* The best epoch of a run with a validation split, recorded in every checkpoint: 2 key/value
 * pairs into meta (4 pointers; text holds the numbers), or 0 before an epoch was validated;
 * taken back on resume from f, whose position has done complete epochs (CLI_FAILURE after a
 * message when damaged; none recorded: none yet). */
#define BEST_ACCURACY_KEY "run.best_val_accuracy"
#define BEST_EPOCH_KEY "run.best_epoch"
int run_best_record(const train_run *run, char text[][RUN_VALUE_MAX], const char **meta);
int run_best_adopt(train_run *run, const cn_safetensors *f, const char *path, int done);
/* "FLAG MINE differs from the checkpoint's SAVED (PATH): ..." for a setting that defines the
 * math (train_checkpoint.c); returns CLI_USAGE. */
int refuse_math_setting(const char *flag, const char *mine, const char *saved, const char *path);

/* Checkpoints and resume (train_checkpoint.c); each returns a CLI_* status after printing
 * what went wrong. In the order a run calls them: */
/* The learning-rate schedule the flags ask for over steps_per_epoch steps an epoch, checked:
 * CLI_OK, or CLI_USAGE after the message (train.c). */
int train_schedule(const train_settings *s, int steps_per_epoch, cn_lr_schedule *out);
/* Reads the --resume checkpoint: the math settings of s come from it (a differing one given on
 * the command line is refused), and so do the start position and, for a folder, the default
 * --checkpoint-dir. Checks the checkpoint flags either way. */
int resume_read(train_settings *s, train_run *run);
/* After the data and the trainer exist: checks the data against the checkpoint and restores the
 * weights and momentum; opens, locks and tidies the checkpoint folder. */
int checkpoints_prepare(const train_settings *s, train_run *run);
/* Before anything is written: refuses an output (checked by cli_output_check) in the
 * checkpoint folder dir under a checkpoint's name (or, with keep_best, the best checkpoint's) or
 * that is one of them by another name, and one that is the folder itself. CLI_OK or CLI_USAGE
 * after the message. */
int checkpoints_check_outputs(const char *dir, const cli_output *outputs, int n, int keep_best);
/* Opens the metrics file of a resumed run for appending, dropping lines of epochs the
 * checkpoint does not hold. */
int metrics_open_for_resume(const train_settings *s, train_run *run);
/* Writes a checkpoint of run->position into the checkpoint folder (when there is one and that
 * position is not saved yet) and prunes the folder to --keep. */
int checkpoint_save(const train_settings *s, train_run *run);
/* With --keep-best: writes the checkpoint of run->position, an epoch's end that is the best so
 * far, to DIR/BEST_CHECKPOINT_NAME (what checkpoint_save would write there, plus its validation
 * accuracy under VAL_ACCURACY_KEY); pruning leaves it alone. */
#define BEST_CHECKPOINT_NAME "best.safetensors"
#define VAL_ACCURACY_KEY "run.val_accuracy"
int best_checkpoint_save(const train_settings *s, train_run *run, double val_accuracy);
void checkpoints_close(train_run *run);

/* SIGINT and SIGTERM (train_signals.c): the first one sets a flag, a second one kills; one
 * ignored at start stays ignored. */
void train_signals_install(void);
void train_signals_restore(void);
/* From the start of `cnnc train`: a write to a closed pipe fails instead of killing. */
void train_signals_ignore_pipe(void);
/* The signal that asked training to stop, SIGPIPE when writing to stdout failed, or 0. */
int train_stop_signal(void);
/* Keeps the epoch's losses and accuracy for the curves (train_curves.c); -1 when out of memory. */
int record_curves(train_run *run, const epoch_report *r);
/* Draws the recorded epochs to s->plot_path when it is set; returns a CLI status. */
int draw_training_curves(const train_settings *s, const train_run *run);
/* The epochs so far as the text every checkpoint records under CURVES_HISTORY_KEY (malloc'd
 * into *text; -1 when out of memory), and taking them back from the resumed checkpoint f, whose
 * position has done complete epochs (CLI_FAILURE after a message when the text is damaged). */
#define CURVES_HISTORY_KEY "run.history"
int curves_history_text(const train_run *run, char **text);
int curves_history_adopt(train_run *run, const cn_safetensors *f, const char *path, int done);

#endif /* CNNC_CLI_TRAIN_H */
