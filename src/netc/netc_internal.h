/* netc_internal.h: what the network compiler's files share: the storage plan and the helpers
 * that print pointers, shapes and strides into the generated C. */
#ifndef CWM_NETC_INTERNAL_H
#define CWM_NETC_INTERNAL_H

#include "cwm/netc.h"

enum { LOC_NONE, LOC_INPUT, LOC_OUTPUT, LOC_CONST, LOC_ARENA };

typedef struct {
  const cwm_partition *p;
  const cwm_graph *g;
  const cwm_netc_opts *o;
  int *root;        /* value -> value whose storage it uses (itself, or a view's source) */
  int *loc, *slot;  /* per root: LOC_*, input/output index */
  long long *off;   /* per root: byte offset in the arena or the weights */
  int *def, *last;  /* per root: first step writing it, last step reading it (-1: none) */
  int *used;        /* value read or written by some step */
  cwm_buf w;        /* the weights file's data */
  long long arena;
  cwm_err *err;
} plan;

int netc_is_view(const char *op);                 /* Reshape, Flatten, Squeeze, Unsqueeze */
int netc_esize(int dtype);                        /* bytes of an element as the runtime stores it */
long long netc_vbytes(const cwm_graph *g, int v);
int netc_plan_storage(plan *pl);                  /* fills everything after err; 0 or an error */
void netc_plan_free(plan *pl);
/* A pointer expression for value v, of C type ty, in the generated run function. */
void netc_vptr(const plan *pl, int v, const char *ty, cwm_buf *b);
/* "(const int64_t[]){...}" */
void netc_ints(cwm_buf *b, const int64_t *x, int n);
/* Strides of input v read over output o's shape (numpy broadcasting: 0 on broadcast dims). */
void netc_bstrides(const cwm_value *v, const cwm_value *o, int64_t *st);
int64_t netc_prod(const int64_t *x, int from, int to);
int netc_node_fail(plan *pl, int n, const char *why);
const int64_t *netc_const_ints(const plan *pl, int v, int *n);
int netc_const_float(const plan *pl, int v, float *x);
int netc_norm_axis(int64_t a, int nd);
/* The C of glue node n (src/netc/glue.c); 0, or an error naming the node. */
int netc_glue(plan *pl, int n, cwm_buf *b);

#endif
