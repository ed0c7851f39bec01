/* train_dist.h — the checks `cnnc train` makes when it runs as several processes
 * (train_dist.c). Declarations only. */
#ifndef CNNC_CLI_TRAIN_DIST_H
#define CNNC_CLI_TRAIN_DIST_H

#include "dist.h"
#include "train.h"

/* --num-cores must be a multiple of the process count (else CLI_USAGE after a message); ranks
 * other than 0 are left no files to write. */
int train_dist_settings(const cli_dist *d, train_settings *s);
/* After every rank has loaded its data: compares each rank's settings, kernels and data with
 * rank 0's (rank 0 says what differs; the same status on every rank) and has rank 0 print how
 * the run is spread. Nothing to do for one process. */
int train_dist_check_same(cli_dist *d, const train_settings *s, const train_run *run);

#endif /* CNNC_CLI_TRAIN_DIST_H */
