/* xgb.c: opens XGBoost's shared library on first use and resolves the functions cwm calls.
 * Nothing links against libxgboost, so a machine without it runs everything else; the models
 * that need it get CWM_EDEP with one line naming the package. When the build found
 * <xgboost/c_api.h> (CWM_HAVE_XGBOOST_H), every pointer type is checked against it. */
#include "cwm/xgb.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CWM_HAVE_XGBOOST_H
#include <xgboost/c_api.h>
#define CHECK_SIG(f)                                                                                  \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&f), __typeof__(((cwm_xgb_api *)0)->f)), \
                 #f " differs from <xgboost/c_api.h>")
_Static_assert(sizeof(bst_ulong) == sizeof(cwm_xgb_ulong), "bst_ulong");
_Static_assert(__builtin_types_compatible_p(DMatrixHandle, cwm_xgb_dmatrix), "DMatrixHandle");
_Static_assert(__builtin_types_compatible_p(BoosterHandle, cwm_xgb_booster), "BoosterHandle");
CHECK_SIG(XGBoostVersion);
CHECK_SIG(XGBGetLastError);
CHECK_SIG(XGBSetGlobalConfig);
CHECK_SIG(XGDMatrixCreateFromMat);
CHECK_SIG(XGDMatrixSetFloatInfo);
CHECK_SIG(XGDMatrixSetUIntInfo);
CHECK_SIG(XGDMatrixNumRow);
CHECK_SIG(XGDMatrixFree);
CHECK_SIG(XGBoosterCreate);
CHECK_SIG(XGBoosterFree);
CHECK_SIG(XGBoosterSetParam);
CHECK_SIG(XGBoosterUpdateOneIter);
CHECK_SIG(XGBoosterBoostOneIter);
CHECK_SIG(XGBoosterBoostedRounds);
CHECK_SIG(XGBoosterPredict);
CHECK_SIG(XGBoosterPredictFromDMatrix);
CHECK_SIG(XGBoosterSaveModelToBuffer);
CHECK_SIG(XGBoosterLoadModelFromBuffer);
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int tried;
static cwm_xgb_api api;
static const cwm_xgb_api *loaded;
static cwm_err failure;
static char path_buf[512];

/* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
#define RESOLVE(f)                                                  \
  do {                                                              \
    void *p_ = dlsym(h, #f);                                        \
    if (!p_) return missing = #f, 0;                                \
    memcpy(&api.f, &p_, sizeof p_);                                 \
  } while (0)

static const char *missing;

static int resolve(void *h) {
  RESOLVE(XGBoostVersion);
  RESOLVE(XGBGetLastError);
  RESOLVE(XGBSetGlobalConfig);
  RESOLVE(XGDMatrixCreateFromMat);
  RESOLVE(XGDMatrixSetFloatInfo);
  RESOLVE(XGDMatrixSetUIntInfo);
  RESOLVE(XGDMatrixNumRow);
  RESOLVE(XGDMatrixFree);
  RESOLVE(XGBoosterCreate);
  RESOLVE(XGBoosterFree);
  RESOLVE(XGBoosterSetParam);
  RESOLVE(XGBoosterUpdateOneIter);
  RESOLVE(XGBoosterBoostOneIter);
  RESOLVE(XGBoosterBoostedRounds);
  RESOLVE(XGBoosterPredict);
  RESOLVE(XGBoosterPredictFromDMatrix);
  RESOLVE(XGBoosterSaveModelToBuffer);
  RESOLVE(XGBoosterLoadModelFromBuffer);
  return 1;
}

/* dlerror's text can hold a newline in odd cases; the message must stay one line. */
static void one_line(char *s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\r') *s = ' ';
}

/* The caller's choice of library, copied: the caller's string need not outlive the call. */
static char chosen[512];

void cwm_xgb_set_library(const char *path) {
  pthread_mutex_lock(&lock);
  snprintf(chosen, sizeof chosen, "%s", path ? path : "");
  pthread_mutex_unlock(&lock);
}

static void open_library(void) {
  int from_env = chosen[0] != 0;
  snprintf(path_buf, sizeof path_buf, "%s", from_env ? chosen : CWM_XGB_SONAME);
  dlerror();
  void *h = dlopen(path_buf, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *de = dlerror();
    if (from_env)
      cwm_fail(&failure, CWM_EDEP, "XGBoost runtime library %s (chosen by the caller) not found: %s", path_buf,
               de ? de : "dlopen failed");
    else
      cwm_fail(&failure, CWM_EDEP,
               "XGBoost runtime library %s not found (install Debian package libxgboost0): %s", path_buf,
               de ? de : "dlopen failed");
    one_line(failure.msg);
    return;
  }
  if (!resolve(h)) {
    cwm_fail(&failure, CWM_EDEP,
             "XGBoost runtime library %s lacks %s (cwm needs XGBoost 1.6 or later, Debian package libxgboost0)",
             path_buf, missing);
    dlclose(h);
    return;
  }
  api.path = path_buf;
  api.XGBoostVersion(&api.major, &api.minor, &api.patch);
  if (api.major < 1 || (api.major == 1 && api.minor < 6)) {
    cwm_fail(&failure, CWM_EDEP, "XGBoost runtime library %s is version %d.%d.%d; cwm needs 1.6 or later",
             path_buf, api.major, api.minor, api.patch);
    dlclose(h);
    return;
  }
  /* XGBoost's own warnings would otherwise reach our stderr, which only the CLI may write */
  api.XGBSetGlobalConfig("{\"verbosity\": 0}");
  loaded = &api; /* the handle stays open for the life of the process */
}

const cwm_xgb_api *cwm_xgb(cwm_err *err) {
  pthread_mutex_lock(&lock);
  if (!tried) {
    tried = 1;
    open_library();
  }
  const cwm_xgb_api *x = loaded;
  pthread_mutex_unlock(&lock);
  if (!x && err) *err = failure;
  return x;
}

int cwm_xgb_fail(const cwm_xgb_api *x, cwm_err *err, const char *what) {
  const char *m = x ? x->XGBGetLastError() : NULL;
  cwm_fail(err, CWM_EDEP, "xgboost: %s: %s", what, m && *m ? m : "unknown error");
  if (err) one_line(err->msg); /* XGBoost's messages span lines (source position, stack) */
  return CWM_EDEP;
}

int cwm_xgb_nthread(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n < 4 ? 1 : 2;
}
