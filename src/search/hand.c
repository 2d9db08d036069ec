/* hand.c: hand-written schedules, as step lists, for three suite workloads, in an 8-lane (AVX2)
 * and a 16-lane (AVX-512) version. They prove that the code generator reaches vendor speed when
 * the schedule is right (bench/core_bench) and drive `cwm demo`. Written the way Ansor's sketches
 * are: cache write / fused consumer, SSRSRS tiles, a packed B panel (cache read attached at the k
 * loop), a parallel fused outer loop. */
#include "cwm/search.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *id;
  const char *steps;
} HAND[] = {
    /* ---- 16-lane vectors (AVX-512), listed first: taken where cwm_codegen_lanes() is 16 ----
     * The same structures with register tiles of two 16-lane vectors: 8 x 32 for the matrix
     * products (16 accumulators of the 32 registers), and for the convolution the output channels
     * vectorized (32, packed contiguous by the layout rewrite) against 7 output columns. */
    {"matmul_1024@16",
     "[[\"CHW\",2,\"local\"],[\"CHR\",1,\"local\",[2]],[\"SP\",3,0,1024,[1,16,8],1],"
     "[\"SP\",3,4,1024,[1,1,32],1],[\"SP\",3,8,1024,[512],1],[\"RE\",3,[0,4,1,5,8,2,6,9,3,7]],"
     "[\"FSP\",4,0,2,2],[\"FSP\",4,3,3,2],[\"RE\",4,[0,3,1,4,2,5]],[\"CA\",3,4,3],[\"CA\",2,3,4],"
     "[\"FU\",4,[0,1,2,3]],[\"AN\",4,0,3],[\"PR\",3,0,\"auto_unroll_max_step$512\"],[\"AN\",3,9,2],"
     "[\"AN\",4,2,2],[\"AN\",2,1,2]]"},
    {"dense_qkv@16",
     "[[\"SP\",3,0,128,[1,16,8],1],[\"SP\",3,4,768,[1,1,32],1],[\"SP\",3,8,768,[256],1],"
     "[\"RE\",3,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",4,0,0,2],[\"FSP\",4,3,1,2],[\"RE\",4,[0,3,1,4,2,5]],"
     "[\"CA\",3,4,3],[\"FU\",4,[0,1,2,3]],[\"AN\",4,0,3],[\"PR\",3,0,\"auto_unroll_max_step$512\"],"
     "[\"AN\",3,9,2],[\"AN\",4,2,2]]"},
    {"conv_s1_3x3@16",
     "[[\"SP\",4,0,1,[1,1,1],1],[\"SP\",4,4,64,[1,1,32],1],[\"SP\",4,8,56,[1,1,1],1],"
     "[\"SP\",4,12,56,[1,8,7],1],[\"RE\",4,[0,4,8,12,1,5,9,13,2,6,10,14,16,17,18,3,11,15,7]],"
     "[\"FSP\",5,0,0,2],[\"FSP\",5,3,1,2],[\"FSP\",5,6,2,2],[\"FSP\",5,9,3,2],"
     "[\"RE\",5,[0,3,6,9,1,4,7,10,2,5,8,11]],[\"CA\",4,5,7],[\"FU\",5,[0,1,2,3,4,5,6,7]],"
     "[\"AN\",5,0,3],[\"AN\",5,4,2],[\"PR\",4,0,\"auto_unroll_max_step$512\"],[\"AN\",4,18,2],"
     "[\"FU\",3,[0,1,2]],[\"AN\",3,0,3],[\"AN\",3,1,2]]"},
    /* ---- 8-lane vectors (AVX2) ---- */
    {"matmul_1024",
     "[[\"CHW\",2,\"local\"],[\"CHR\",1,\"local\",[2]],[\"SP\",3,0,1024,[1,32,4],1],"
     "[\"SP\",3,4,1024,[1,1,16],1],[\"SP\",3,8,1024,[512],1],[\"RE\",3,[0,4,1,5,8,2,6,9,3,7]],"
     "[\"FSP\",4,0,2,2],[\"FSP\",4,3,3,2],[\"RE\",4,[0,3,1,4,2,5]],[\"CA\",3,4,3],[\"CA\",2,3,4],"
     "[\"FU\",4,[0,1,2,3]],[\"AN\",4,0,3],[\"PR\",3,0,\"auto_unroll_max_step$64\"],[\"AN\",3,9,2],"
     "[\"AN\",4,2,2],[\"AN\",2,1,2]]"},
    /* dense with bias, as MultiLevelTilingWithFusion: D tiled SSRSRS (4x16 register tile under
     * a 256-long k loop), computed at the bias stage's fused parallel loop. W is a constant input,
     * so it is stored as the loops read it, layout(j.0:48, k.0:3, k.1:256, j.3:16): the vectorized j.3
     * loop reads 16 contiguous floats (in W's own layout the stride would be K). */
    {"dense_qkv",
     "[[\"SP\",3,0,128,[1,32,4],1],[\"SP\",3,4,768,[1,1,16],1],[\"SP\",3,8,768,[256],1],"
     "[\"RE\",3,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",4,0,0,2],[\"FSP\",4,3,1,2],[\"RE\",4,[0,3,1,4,2,5]],"
     "[\"CA\",3,4,3],[\"FU\",4,[0,1,2,3]],[\"AN\",4,0,3],[\"PR\",3,0,\"auto_unroll_max_step$64\"],"
     "[\"AN\",3,9,2],[\"AN\",4,2,2]]"},
    {"conv_s1_3x3",
     "[[\"SP\",4,0,1,[1,1,1],1],[\"SP\",4,4,64,[1,4,4],1],[\"SP\",4,8,56,[1,1,2],1],"
     "[\"SP\",4,12,56,[1,7,8],1],[\"RE\",4,[0,4,8,12,1,5,9,13,2,6,10,14,16,17,18,3,7,11,15]],"
     "[\"FSP\",5,0,0,2],[\"FSP\",5,3,1,2],[\"FSP\",5,6,2,2],[\"FSP\",5,9,3,2],"
     "[\"RE\",5,[0,3,6,9,1,4,7,10,2,5,8,11]],[\"CA\",4,5,7],[\"FU\",5,[0,1,2,3,4,5,6,7]],"
     "[\"AN\",5,0,3],[\"AN\",5,4,2],[\"PR\",4,0,\"auto_unroll_max_step$64\"],[\"AN\",4,18,2],"
     "[\"FU\",3,[0,1,2]],[\"AN\",3,0,3],[\"AN\",3,1,2]]"},
};

int cwm_hand_schedule(const char *id, cwm_step **steps, int *n, cwm_err *err) {
  char wide[64];
  snprintf(wide, sizeof wide, "%s@16", id);
  if (cwm_codegen_lanes() >= 16)
    for (size_t i = 0; i < sizeof HAND / sizeof HAND[0]; i++)
      if (!strcmp(HAND[i].id, wide)) return cwm_steps_parse(HAND[i].steps, steps, n, err);
  for (size_t i = 0; i < sizeof HAND / sizeof HAND[0]; i++)
    if (!strcmp(HAND[i].id, id)) return cwm_steps_parse(HAND[i].steps, steps, n, err);
  return cwm_fail(err, CWM_EUSAGE, "no hand schedule for '%s' (there are: matmul_1024, dense_qkv, conv_s1_3x3)", id);
}
