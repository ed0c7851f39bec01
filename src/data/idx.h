/* idx.h — an IDX file of unsigned bytes read in two steps inside the library: its header, checked
 * on its own (cn_idx_open), then its data (cn_idx_read_data), so that the dataset loader can
 * compare the headers of the images and the labels before it reads or allocates either body.
 * cn_idx_read (cnnc.h) is the two steps in one. Nothing here parses the data. */
#ifndef CN_IDX_H
#define CN_IDX_H

#include "cnnc.h"

typedef struct cn_idx_file cn_idx_file;

/* Opens path and reads its header, checking it as cn_idx_read does (magic, element type,
 * want_ndim dimensions, none zero, at most 1 GiB of data, a raw file exactly that long, a gzip
 * file large enough to hold it); dims gets the dimensions. Reads no data and allocates nothing
 * for it. NULL with a message naming path. */
cn_idx_file *cn_idx_open(const char *path, int want_ndim, int dims[3], cn_error *err);
/* Reads the data the header announced, and checks that nothing follows it, into a new malloc'd
 * buffer (*data, the caller frees it); -1 with a message when the file holds less or more. */
int cn_idx_read_data(cn_idx_file *f, uint8_t **data, cn_error *err);
/* Closes the file; f may be NULL. */
void cn_idx_close(cn_idx_file *f);

#endif /* CN_IDX_H */
