/* modelfile.h: the world model's one versioned file: named sections of configuration text,
 * raw bytes (the vocabulary, the XGBoost model) and float32 tensors (the weights).
 * Depends only on util.h. Written atomically; read back with every length checked before it
 * is trusted, so a truncated, altered or foreign file is an error naming what is wrong, never
 * a crash or a huge allocation.
 *
 * Layout, version 1. Integers little-endian, offsets from the start of the file:
 *
 *   0       8 bytes   magic "CWMMODEL"
 *   8       u32       format version (CWM_MFILE_VERSION)
 *   12      u32       section count N (at most CWM_MFILE_MAX_SECTIONS)
 *   16      u64       file size in bytes, checksum included
 *   24      N x 88    section table, one entry per section:
 *             +0   48 bytes  name: 1 to 47 printable ASCII bytes (no space), NUL-padded
 *             +48  u32       kind: 1 text, 2 bytes, 3 float32 tensor
 *             +52  u32       ndims: 0 to 4 for a tensor (0: a scalar), 0 otherwise
 *             +56  4 x u32   dims (each below 2^31; unused ones 0)
 *             +72  u64       payload offset, a multiple of 64
 *             +80  u64       payload length in bytes
 *   ...               payloads in table order, each at a multiple of 64, zero padding between
 *   size-8  u64       FNV-1a 64 (cwm_hash64) of bytes [0, size-8)
 *
 * A text payload is the text plus one terminating NUL (and no other NUL); a tensor payload is
 * exactly 4 * prod(dims) bytes of float32, row-major, little-endian. Section names are unique.
 *
 * Errors: every defect found while reading is CWM_EMODEL with a message that starts with the
 * file's path ("model data" for cwm_mfile_parse) and says what is wrong: not a cwm model file,
 * another version, truncated at byte X inside the table / section 'name' / the checksum, a
 * checksum mismatch, a section out of bounds or overlapping another, a duplicate section, a
 * tensor whose size does not match its shape, an absurd count. Writer misuse (a bad name, a
 * duplicate, a negative dimension) is CWM_EINTERNAL; a failed write is CWM_EIO. */
#ifndef CWM_MODELFILE_H
#define CWM_MODELFILE_H

#include <stddef.h>

#include "cwm/util.h"

#define CWM_MFILE_VERSION 1
#define CWM_MFILE_MAX_SECTIONS 4096
#define CWM_MFILE_NAME_MAX 47
#define CWM_MFILE_MAX_DIMS 4

typedef enum { CWM_MFILE_TEXT = 1, CWM_MFILE_BYTES = 2, CWM_MFILE_TENSOR = 3 } cwm_mfile_kind;

/* ---- writing ---- */

typedef struct cwm_mfile_writer cwm_mfile_writer;

cwm_mfile_writer *cwm_mfile_writer_new(void);
void cwm_mfile_writer_free(cwm_mfile_writer *w);
/* Each add copies its data; sections are written in the order added. */
int cwm_mfile_add_text(cwm_mfile_writer *w, const char *name, const char *text, cwm_err *err);
int cwm_mfile_add_bytes(cwm_mfile_writer *w, const char *name, const void *data, size_t n, cwm_err *err);
/* shape[0..ndims-1] >= 0 (0 <= ndims <= 4); data holds prod(shape) floats (NULL if none). */
int cwm_mfile_add_tensor(cwm_mfile_writer *w, const char *name, const float *data, int ndims, const int *shape,
                         cwm_err *err);
/* The whole file in memory: *out is malloc'ed (free() it). */
int cwm_mfile_serialize(const cwm_mfile_writer *w, unsigned char **out, size_t *n, cwm_err *err);
/* Writes path through cwm_write_file_atomic (a temporary name, then rename): an existing file
 * is replaced whole or left as it was. */
int cwm_mfile_write(const cwm_mfile_writer *w, const char *path, cwm_err *err);

/* ---- reading ---- */

typedef struct cwm_mfile cwm_mfile;

/* A file that cannot be read is CWM_EMODEL too ("cannot read model file"). */
cwm_mfile *cwm_mfile_load(const char *path, cwm_err *err);
/* data is copied; the result does not refer to it. */
cwm_mfile *cwm_mfile_parse(const void *data, size_t n, cwm_err *err);
void cwm_mfile_free(cwm_mfile *f);

int cwm_mfile_count(const cwm_mfile *f);
const char *cwm_mfile_section_name(const cwm_mfile *f, int i); /* NULL when out of range */
int cwm_mfile_section_kind(const cwm_mfile *f, int i);          /* 0 when out of range */

/* Lookups by name return NULL when the section is absent or of another kind.
 * text: NUL-terminated. bytes: the payload of any kind (a text without its NUL).
 * tensor: 64-byte aligned host floats, valid until cwm_mfile_free; shape gets ndims dims. */
const char *cwm_mfile_text(const cwm_mfile *f, const char *name);
const void *cwm_mfile_bytes(const cwm_mfile *f, const char *name, size_t *n);
const float *cwm_mfile_tensor(const cwm_mfile *f, const char *name, int shape[CWM_MFILE_MAX_DIMS], int *ndims);

/* For a model's loader: CWM_EMODEL ("missing section 'x'", "section 'x' is bytes, not a
 * tensor") unless section name exists with the kind. need_tensor also checks the shape
 * (ndims dims; a dim of -1 matches any size). */
int cwm_mfile_need(const cwm_mfile *f, const char *name, cwm_mfile_kind kind, cwm_err *err);
int cwm_mfile_need_tensor(const cwm_mfile *f, const char *name, int ndims, const int *shape, cwm_err *err);

#endif
