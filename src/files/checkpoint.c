/* checkpoint.c — a model's state_dict to and from a safetensors file, under PyTorch's names.
 * Loading checks the whole file against the model (names, dtypes, shapes, finite values, no
 * negative running variance) before it copies anything, so a refused file leaves the model as it
 * was. It does not restore optimizer.* tensors (they are tolerated, not read;
 * train_checkpoint.c reads them) nor convert dtypes or shapes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "files/checkpoint.h"
#include "model/model.h" /* the class names' text */

static const char *dtype_name(cn_dtype dtype)
{
    return dtype == CN_I64 ? "I64" : "F32";
}

static size_t element_size(cn_dtype dtype)
{
    return dtype == CN_I64 ? 8 : 4;
}

static size_t element_count(const cn_tensor_ref *t)
{
    size_t count = 1;
    for (int d = 0; d < t->ndim; d++) count *= (size_t)t->shape[d];
    return count;
}

/* "[10, 1, 5, 5]" into buf. */
static const char *format_shape(char *buf, size_t cap, const cn_tensor_ref *t)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "",
                                 (long long)t->shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

static int same_shape(const cn_tensor_ref *a, const cn_tensor_ref *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

cn_tensor_ref *cn_state_refs(cn_model *m, int *count, const char *path, cn_error *err)
{
    int n = cn_model_tensors(m, NULL, 0);
    cn_tensor_ref *refs = calloc(n > 0 ? (size_t)n : 1, sizeof *refs);
    if (!refs) {
        cn_fail(err, "%s: %s", path, strerror(ENOMEM));
        return NULL;
    }
    *count = cn_model_tensors(m, refs, n);
    return refs;
}

int cn_model_save(cn_model *m, const char *path, cn_error *err)
{
    const char *const meta[] = {"cnnc_version", CN_VERSION, "model", cn_model_text(m),
                                "classes", cn_model_classes_text(m)};
    int n = 0;
    cn_tensor_ref *refs = cn_state_refs(m, &n, path, err);
    if (!refs) return -1;
    int rc = cn_safetensors_write(path, refs, n, meta, cn_model_classes_text(m) ? 3 : 2, err);
    free(refs);
    return rc;
}

/* The index of the first value of t (F32, read unaligned) for which bad is true, or -1. */
static long first_bad(const cn_tensor_ref *t, int (*bad)(float))
{
    size_t count = element_count(t);
    const unsigned char *bytes = t->data;
    for (size_t i = 0; i < count; i++) {
        float v;
        memcpy(&v, bytes + i * sizeof v, sizeof v);
        if (bad(v)) return (long)i;
    }
    return -1;
}

static int not_finite(float v)
{
    return !isfinite(v);
}

static int negative(float v)
{
    return v < 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int cn_check_expected_tensor(const cn_safetensors *f, const cn_tensor_ref *want,
                             const char *path, cn_error *err)
{
    const cn_tensor_ref *got = cn_safetensors_get(f, want->name);
    char a[128], b[128];
    if (!got) return cn_fail(err, "%s: tensor %s is missing", path, want->name);
    if (got->dtype != want->dtype)
        return cn_fail(err, "%s: tensor %s is %s in the file, the model expects %s", path,
                       want->name, dtype_name(got->dtype), dtype_name(want->dtype));
    if (!same_shape(got, want))
        return cn_fail(err, "%s: tensor %s has shape %s in the file, the model expects %s", path,
                       want->name, format_shape(a, sizeof a, got),
                       format_shape(b, sizeof b, want));
    if (got->dtype == CN_F32 && first_bad(got, not_finite) >= 0)
        return cn_fail(err, "%s: tensor %s holds non-finite values", path, want->name);
    int variance = ends_with(want->name, ".running_var") || ends_with(want->name, ".exp_avg_sq");
    long at = variance ? first_bad(got, negative) : -1;
    if (at >= 0)
        return cn_fail(err, "%s: tensor %s holds a negative variance (element %ld)", path,
                       want->name, at);
    return 0;
}

int cn_ref_listed(const char *name, const cn_tensor_ref *refs, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(refs[i].name, name) == 0) return 1;
    return 0;
}

static int check_extras(const cn_safetensors *f, const cn_tensor_ref *refs, int n,
                        const char *path, cn_error *err)
{
    for (int i = 0; i < cn_safetensors_count(f); i++) {
        const char *name = cn_safetensors_at(f, i)->name;
        if (strncmp(name, "optimizer.", 10) != 0 && !cn_ref_listed(name, refs, n))
            return cn_fail(err, "%s: tensor %s is not part of this model", path, name);
    }
    return 0;
}

int cn_check_model_tensors(const cn_safetensors *f, const cn_tensor_ref *refs, int n,
                           const char *path, cn_error *err)
{
    for (int i = 0; i < n; i++)
        if (cn_check_expected_tensor(f, &refs[i], path, err) != 0) return -1;
    return check_extras(f, refs, n, path, err);
}

void cn_copy_tensors(const cn_safetensors *f, const cn_tensor_ref *refs, int n)
{
    for (int i = 0; i < n; i++) {
        const cn_tensor_ref *got = cn_safetensors_get(f, refs[i].name);
        size_t bytes = element_count(&refs[i]) * element_size(refs[i].dtype);
        if (bytes > 0) memcpy(refs[i].data, got->data, bytes);
    }
}

int cn_model_load(cn_model *m, const char *path, cn_error *err)
{
    cn_safetensors *f = cn_safetensors_read(path, err);
    if (!f) return -1;
    int n = 0;
    cn_tensor_ref *refs = cn_state_refs(m, &n, path, err);
    int rc = refs ? cn_check_model_tensors(f, refs, n, path, err) : -1;
    const char *classes = cn_safetensors_meta(f, "classes");
    if (rc == 0 && classes) rc = cn_model_set_classes_text(m, classes, path, err);
    if (rc == 0) cn_copy_tensors(f, refs, n);
    else cn_keep_one_line(err);
    free(refs);
    cn_safetensors_free(f);
    return rc;
}
