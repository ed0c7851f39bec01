/* checkpoint.h — what checkpoint.c (model state_dicts) shares with train_checkpoint.c (training
 * checkpoints): the model's tensor list and the checks of a file's tensors against it. Nothing
 * here reads or writes files. */
#ifndef CN_CHECKPOINT_H
#define CN_CHECKPOINT_H

#include "cnnc.h"

/* The model's state_dict references (pointing into m), malloc'd; *count gets how many. */
cn_tensor_ref *cn_state_refs(cn_model *m, int *count, const char *path, cn_error *err);
/* The file holds want->name with want's dtype and shape, and finite values when F32. */
int cn_check_expected_tensor(const cn_safetensors *f, const cn_tensor_ref *want,
                             const char *path, cn_error *err);
/* Whether one of refs[0..n) is called name. */
int cn_ref_listed(const char *name, const cn_tensor_ref *refs, int n);
/* Every one of the n model tensors is there as expected, and nothing else but optimizer.*. */
int cn_check_model_tensors(const cn_safetensors *f, const cn_tensor_ref *refs, int n,
                           const char *path, cn_error *err);
/* Copies the file's bytes of each named tensor into refs[i].data (checked beforehand). */
void cn_copy_tensors(const cn_safetensors *f, const cn_tensor_ref *refs, int n);

#endif /* CN_CHECKPOINT_H */
