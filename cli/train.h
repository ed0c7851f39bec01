/* train.h — the state `cnnc train` passes between its parsing, driving (train.c) and reporting
 * (train_report.c) parts. Plain structs and the report functions; no logic lives here. */
#ifndef CNNC_CLI_TRAIN_H
#define CNNC_CLI_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "cnnc.h"
#include "progress.h"

/* What the flags asked for; fixed once parsed. */
typedef struct {
    const char *data_dir;
    int batch_size;      /* per replica */
    float learning_rate; /* per replica; the library scales it by num_cores */
    float momentum;
    int num_epochs;
    int num_cores;       /* replicas */
    int threads;
    int log_steps;
    int metrics_debug;
    uint64_t seed;
    int train_samples;   /* 0: all */
    int test_samples;    /* 0: all */
    const char *save_path;    /* NULL: not saved */
    const char *result_image; /* NULL: no picture */
    const char *metrics_path; /* NULL: no metrics file */
    const char *plot_path;    /* NULL: no training curves */
    progress_level verbosity; /* PROGRESS_QUIET, _NORMAL or _VERBOSE */
} train_settings;

/* What one training run owns. */
typedef struct {
    cn_dataset train, test;
    cn_model *model;
    cn_trainer *trainer;
    FILE *metrics;        /* open metrics file or NULL */
    uint8_t *predictions; /* [test.count], from the latest evaluation */
    int steps;            /* optimiser steps per epoch */
    progress progress;    /* what the terminal or log shows */
    cn_epoch_metrics *history; /* [history_count] the epochs so far, for the curves */
    int history_count, history_capacity;
} train_run;

/* The measurements of one epoch. */
typedef struct epoch_report {
    int epoch;
    float train_loss;      /* mean step loss */
    double test_loss;      /* mean NLL over the test images */
    double test_accuracy;  /* percent */
    double train_seconds;  /* the training part of the epoch */
    double eval_seconds;   /* the test pass */
    long train_samples;    /* samples trained on in the epoch */
    int test_samples;
    cn_phase_times phases; /* this epoch only */
} epoch_report;

/* "cnnc 0.1.0 train: 8 replicas x 128 ..." — the settings a run uses, printed once. */
void print_settings_line(const train_settings *s, const train_run *run);
/* The epoch's summary line and, with metrics_debug, where its time went. */
void print_epoch_report(const epoch_report *r, int metrics_debug);
/* One JSON object on one line, flushed; returns -1 (errno set) when writing failed. */
int write_metrics_line(FILE *f, const epoch_report *r);

/* Keeps the epoch's losses and accuracy for the curves (train_curves.c); -1 when out of memory. */
int record_curves(train_run *run, const epoch_report *r);
/* Draws the recorded epochs to s->plot_path when it is set; returns a CLI status. */
int draw_training_curves(const train_settings *s, const train_run *run);

#endif /* CNNC_CLI_TRAIN_H */
