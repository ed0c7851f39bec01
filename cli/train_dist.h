/* train_dist.h — the checks `cnnc train` makes when it runs as several processes
 * (train_dist.c). Declarations only. */
#ifndef CNNC_CLI_TRAIN_DIST_H
#define CNNC_CLI_TRAIN_DIST_H

#include "dist.h"
#include "train.h"

/* Before the output folders are checked: ranks other than 0 are left no files to write (the
 * model, picture, metrics and curves are rank 0's, at its paths on its host). */
int train_dist_outputs(const cli_dist *d, train_settings *s);
/* Once the settings are final (a resumed run takes them from its checkpoint): --num-cores must
 * be a multiple of the process count (else CLI_USAGE after a message), every exchange from now
 * on waits at most --mpi-timeout seconds (the message on a lost process says what is left in
 * the checkpoint folder), and ranks other than 0 are left no checkpoint folder (they still
 * restore a resumed run's state). */
int train_dist_replicas(cli_dist *d, train_settings *s);
/* After every rank has loaded its data and state: compares each rank's settings, kernels,
 * data and (resumed) model state with rank 0's (rank 0 says what differs; the same status on
 * every rank) and has rank 0 print how the run is spread. Nothing to do for one process. */
int train_dist_check_same(cli_dist *d, const train_settings *s, train_run *run);

#endif /* CNNC_CLI_TRAIN_DIST_H */
