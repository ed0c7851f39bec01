/* file_read.h — reading a whole regular file into memory, for the readers that parse from a
 * buffer (safetensors, image files); cn_open_regular, which every reader opens its file with, is
 * public (cnnc.h). It neither parses nor maps files, and reads no pipes or devices. */
#ifndef CN_FILE_READ_H
#define CN_FILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "cnnc.h"

/* What cn_read_file returns for a file over its size limit. */
#define CN_FILE_TOO_LARGE 1

/* Reads the regular file at path into a new malloc'd buffer (*bytes, *len; an empty file still
 * gets one, to free). Returns 0, or -1 with err naming path when it cannot be opened or read or
 * is not a regular file (cn_open_regular; *bytes is then NULL or untouched). A file of more
 * than max_bytes (never more than SIZE_MAX / 2) is not read: CN_FILE_TOO_LARGE, with its size
 * in *len (SIZE_MAX if a size_t cannot hold it) and err left to the caller, who says what the
 * limit is for. */
int cn_read_file(const char *path, uint64_t max_bytes, uint8_t **bytes, size_t *len,
                 cn_error *err);

#endif /* CN_FILE_READ_H */
