/* progress.h — what `cnnc train` shows while it trains, at three levels: --quiet (the final
 * epoch's summary and the total time only), normal, and --verbose (plus where each epoch's time
 * went). On a terminal a bar per epoch is redrawn in place (step, the epoch's mean loss and
 * training accuracy so far, the run's elapsed time and time left, samples/s where the width
 * allows); anywhere else (a pipe, a log file, CI) only whole lines are written: the loss every
 * --log-steps steps and "Finished training epoch N". It trains and measures nothing itself. */
#ifndef CNNC_CLI_PROGRESS_H
#define CNNC_CLI_PROGRESS_H

#include <stdio.h>

#include "cnnc.h"

struct epoch_report; /* train.h */

typedef enum { PROGRESS_QUIET = -1, PROGRESS_NORMAL = 0, PROGRESS_VERBOSE = 1 } progress_level;

typedef struct {
    FILE *out;
    progress_level level;
    int live;               /* a terminal: the bar is redrawn with \r */
    int columns;            /* the terminal's width; the bar line stays shorter */
    int log_steps;
    int num_epochs;
    long samples_per_step;
    int epoch;              /* the epoch being trained */
    int first_step;         /* its first step in this process (a resumed run starts later) */
    double loss_sum;        /* its step losses so far, resumed steps included */
    int64_t correct;        /* its right answers so far */
    int steps_done;         /* its steps so far */
    double epoch_start;     /* when this process began it */
    double run_start;       /* when the first epoch began */
    double last_draw;       /* when the bar was last drawn */
    int bar_shown;          /* the bar is on the current line, without a newline */
    int bar_length;         /* characters of the bar line last drawn */
    int bar_cells;          /* this epoch's bar width; -1 before its first line */
    int show_rate;          /* this epoch's bar line has room for samples/s */
    int run_first_epoch;    /* the first epoch this process trained */
} progress;

/* Decides between bar and lines from out (a terminal whose TERM is not "dumb" gets the bar). */
void progress_init(progress *p, FILE *out, progress_level level, int log_steps, int num_epochs,
                   long samples_per_step);
/* Whether messages of this level are shown: PROGRESS_NORMAL for the usual lines. */
int progress_shows(const progress *p, progress_level level);

/* The epoch of pos begins, or goes on from where pos stands. */
void progress_epoch_begin(progress *p, const cn_epoch_position *pos);
/* A cn_step_fn; ctx is the progress. */
void progress_step(void *ctx, const cn_step_report *step);
/* The epoch's steps are done and its test pass begins. */
void progress_epoch_trained(progress *p, int epoch, int steps);
/* Replaces the bar with the epoch's summary line (and with --verbose or metrics_debug, its time
 * breakdown). Quiet shows only the last epoch's summary. */
void progress_epoch_report(progress *p, const struct epoch_report *r, int metrics_debug);
/* Ends the bar's line, so that an error message starts on a line of its own. */
void progress_break(progress *p);

#endif /* CNNC_CLI_PROGRESS_H */
