/* class_names.c — class names as a dataset or a model holds them: checking one name, reading
 * a list of them (one per line) from text or from a file such as classes.txt or CIFAR-10's
 * batches.meta.txt. It does not decide where names come from (dataset.c does) and keeps no
 * state. */
#include <stdlib.h>
#include <string.h>

#include "data/formats.h"
#include "files/file_read.h"

#define NAMES_FILE_LIMIT (64u << 10)

/* Bytes of the well-formed UTF-8 sequence at s (1..4), or 0 when it is not one. */
static int utf8_sequence(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
          : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 2 && s[0] < 0xc2) return 0; /* overlong */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || s[0] > 0xf4 || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;
    return n;
}

int cn_class_name_check(const char *name, int c, cn_error *err)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > CN_CLASS_NAME_MAX)
        return cn_fail(err, "class %d: a name must have 1 to %d bytes", c, CN_CLASS_NAME_MAX);
    for (const unsigned char *at = (const unsigned char *)name; *at;) {
        if (*at < 0x20 || *at == 0x7f)
            return cn_fail(err, "class %d: a name may not hold control characters", c);
        int step = utf8_sequence(at);
        if (step == 0) return cn_fail(err, "class %d: the name is not UTF-8", c);
        at += step;
    }
    return 0;
}

void cn_class_names_free(char **names, int count)
{
    if (!names) return;
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}

/* The number of lines of text, trailing empty lines left out. */
static int count_lines(const char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r')) len--;
    int lines = len > 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    return lines;
}

static int take_line(char **out, const char *at, size_t n, int c, const char *source,
                     cn_error *err)
{
    if (n > 0 && at[n - 1] == '\r') n--;
    if (memchr(at, '\0', n))
        return cn_fail(err, "%s: line %d: class %d: a name may not hold control characters",
                       source, c + 1, c);
    *out = malloc(n + 1);
    if (!*out) return cn_fail(err, "%s: out of memory", source);
    memcpy(*out, at, n), (*out)[n] = '\0';
    cn_error why = {{0}};
    if (cn_class_name_check(*out, c, &why))
        return cn_fail(err, "%s: line %d: %s", source, c + 1, why.msg);
    return 0;
}

int cn_class_names_parse(const char *text, size_t len, const char *source, char ***names,
                         int *count, cn_error *err)
{
    int n = count_lines(text, len);
    if (n == 0) return cn_fail(err, "%s: no class names (one per line)", source);
    if (n > CN_MAX_CLASSES)
        return cn_fail(err, "%s: %d class names, more than the %d cnnc takes", source, n,
                       CN_MAX_CLASSES);
    char **list = calloc((size_t)n, sizeof *list);
    if (!list) return cn_fail(err, "%s: out of memory", source);
    const char *at = text;
    for (int c = 0; c < n; c++) {
        const char *nl = memchr(at, '\n', len - (size_t)(at - text));
        size_t span = nl ? (size_t)(nl - at) : len - (size_t)(at - text);
        if (take_line(&list[c], at, span, c, source, err)) {
            cn_class_names_free(list, n);
            return -1;
        }
        at += span + 1;
    }
    *names = list, *count = n;
    return 0;
}

int cn_class_names_read(const char *path, char ***names, int *count, cn_error *err)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = cn_read_file(path, NAMES_FILE_LIMIT, &bytes, &len, err);
    if (rc == CN_FILE_TOO_LARGE)
        rc = cn_fail(err, "%s: %zu bytes is too large for a list of class names (at most %u)",
                     path, len, NAMES_FILE_LIMIT);
    if (rc == 0) rc = cn_class_names_parse((const char *)bytes, len, path, names, count, err);
    free(bytes);
    return rc;
}
