/* xgb.h: XGBoost's C API, resolved at run time with dlopen so that cwm builds and starts on a
 * machine without the library; only the models that need XGBoost (the `ansor` cost model, the
 * world model's ranker) fail, with CWM_EDEP and one line that says what to install.
 * The handle types mirror <xgboost/c_api.h> (xgb.c checks every signature against that header
 * when the build found it). The library is opened once per process and never closed. */
#ifndef CWM_XGB_H
#define CWM_XGB_H

#include <stdint.h>

#include "cwm/util.h"

/* The Debian soname (package libxgboost0); CWM_XGBOOST_LIB in the environment overrides it. */
#define CWM_XGB_SONAME "libxgboost.so.0"

typedef uint64_t cwm_xgb_ulong;  /* bst_ulong */
typedef void *cwm_xgb_dmatrix;   /* DMatrixHandle */
typedef void *cwm_xgb_booster;   /* BoosterHandle */

/* Every XGBoost function cwm calls, named as in c_api.h. All are non-NULL in a table that
 * cwm_xgb returned. XGDMatrixSetGroup is left out on purpose: it is deprecated since 1.6;
 * query groups go through XGDMatrixSetUIntInfo(d, "group", sizes, ngroups). */
typedef struct {
  const char *path;              /* the file that was opened */
  int major, minor, patch;       /* XGBoostVersion */
  void (*XGBoostVersion)(int *major, int *minor, int *patch);
  const char *(*XGBGetLastError)(void);
  int (*XGBSetGlobalConfig)(const char *config);
  int (*XGDMatrixCreateFromMat)(const float *data, cwm_xgb_ulong nrow, cwm_xgb_ulong ncol, float missing,
                                cwm_xgb_dmatrix *out);
  int (*XGDMatrixSetFloatInfo)(cwm_xgb_dmatrix d, const char *field, const float *array, cwm_xgb_ulong len);
  int (*XGDMatrixSetUIntInfo)(cwm_xgb_dmatrix d, const char *field, const unsigned *array, cwm_xgb_ulong len);
  int (*XGDMatrixNumRow)(cwm_xgb_dmatrix d, cwm_xgb_ulong *out);
  int (*XGDMatrixFree)(cwm_xgb_dmatrix d);
  int (*XGBoosterCreate)(const cwm_xgb_dmatrix dmats[], cwm_xgb_ulong len, cwm_xgb_booster *out);
  int (*XGBoosterFree)(cwm_xgb_booster b);
  int (*XGBoosterSetParam)(cwm_xgb_booster b, const char *name, const char *value);
  int (*XGBoosterUpdateOneIter)(cwm_xgb_booster b, int iter, cwm_xgb_dmatrix dtrain);
  int (*XGBoosterBoostOneIter)(cwm_xgb_booster b, cwm_xgb_dmatrix dtrain, float *grad, float *hess,
                               cwm_xgb_ulong len);
  int (*XGBoosterBoostedRounds)(cwm_xgb_booster b, int *out);
  int (*XGBoosterPredict)(cwm_xgb_booster b, cwm_xgb_dmatrix d, int option_mask, unsigned ntree_limit,
                          int training, cwm_xgb_ulong *out_len, const float **out_result);
  int (*XGBoosterPredictFromDMatrix)(cwm_xgb_booster b, cwm_xgb_dmatrix d, const char *config,
                                     const cwm_xgb_ulong **out_shape, cwm_xgb_ulong *out_dim,
                                     const float **out_result);
  int (*XGBoosterSaveModelToBuffer)(cwm_xgb_booster b, const char *config, cwm_xgb_ulong *out_len,
                                    const char **out_dptr);
  int (*XGBoosterLoadModelFromBuffer)(cwm_xgb_booster b, const void *buf, cwm_xgb_ulong len);
} cwm_xgb_api;

/* The API table, opening the library on the first call (thread-safe). NULL with CWM_EDEP and a
 * one-line message when the library is missing, lacks a function or is older than 1.6; the
 * outcome is cached, so a process that failed once keeps failing the same way. */
const cwm_xgb_api *cwm_xgb(cwm_err *err);
/* The library cwm_xgb opens instead of the Debian soname (NULL or "": the soname). Only a call
 * before the first cwm_xgb counts, since the outcome is cached; the path is copied. */
void cwm_xgb_set_library(const char *path);

/* Fills err with CWM_EDEP and "xgboost: <what>: <XGBGetLastError>", returns CWM_EDEP. */
int cwm_xgb_fail(const cwm_xgb_api *x, cwm_err *err, const char *what);

/* The thread count the XGBoost models use: 1 on machines with fewer than 4 CPUs (two OpenMP
 * threads spinning at their barriers while the CPUs were busy slowed training up to 50x), else 2. */
int cwm_xgb_nthread(void);

#endif
