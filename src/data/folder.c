/* folder.c — image folders (torchvision's ImageFolder layout): not read by this build yet. */
#include "data/formats.h"

int cn_folder_split_read(cn_dataset *ds, const char *dir, const char *split, int channels,
                         cn_error *err)
{
    (void)ds, (void)channels;
    return cn_fail(err, "%s/%s: image folders are not read by this build", dir, split);
}
