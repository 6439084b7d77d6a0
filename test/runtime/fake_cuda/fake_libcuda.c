/* A stand-in for libcuda.so.1 (built under that name into its own directory and
 * found through LD_LIBRARY_PATH by cuda_launch_test only): it implements the driver
 * functions the runtime resolves, records what it was asked to do and lets the test
 * read that back (fake_* functions: the last launch, and the launches in order). No
 * GPU, no kernels: it checks the runtime's side of the driver API (image choice per
 * device, module caching, function attributes, launch configuration and argument
 * marshalling, the kernels a call launches and their order, context balance, error
 * texts).
 *
 *   devices: 0 = compute capability 8.6, 1 = 9.0, 2 = 12.0; any other ordinal is invalid.
 *   kernel "missing": cuModuleGetFunction fails (CUDA_ERROR_NOT_FOUND);
 *   kernel "fail_launch": cuLaunchKernel fails (CUDA_ERROR_LAUNCH_FAILED). */
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static int ctx_depth, module_loads, args_expected;
static const void *last_image;
static int last_attr = -1, last_attr_value = -1;
static unsigned last_grid[3], last_block[3], last_smem;
static void *last_stream;
static char last_kernel[64];
static uint64_t last_args[32];
/* Every successful launch since fake_clear_launches, in order (at most 16). */
#define FAKE_LOG 16
static int launches;
static char launch_kernel[FAKE_LOG][64];
static unsigned launch_grid[FAKE_LOG][3];
static uint64_t launch_args[FAKE_LOG][32];

EXPORT int cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
EXPORT int cuDeviceGet(int *dev, int ordinal) {
  if (ordinal < 0 || ordinal > 2)
    return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal;
  return 0;
}
EXPORT int cuDeviceGetAttribute(int *value, int attribute, int dev) {
  switch (attribute) {
  case 75: *value = dev == 0 ? 8 : dev == 1 ? 9 : 12; return 0;
  case 76: *value = dev == 0 ? 6 : 0; return 0;
  case 16: *value = dev == 1 ? 132 : 108; return 0;
  case 97: *value = dev == 0 ? 101376 : dev == 1 ? 232448 : 101376; return 0;
  default: return 1;
  }
}
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  *ctx = (void *)(uintptr_t)(0x1000 + dev);
  return 0;
}
EXPORT int cuCtxPushCurrent_v2(void *ctx) { (void)ctx; ++ctx_depth; return 0; }
EXPORT int cuCtxPopCurrent_v2(void **ctx) { *ctx = 0; --ctx_depth; return 0; }
EXPORT int cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options,
                              void **values) {
  (void)n; (void)options; (void)values;
  last_image = image;
  ++module_loads;
  *module = (void *)image;
  return 0;
}
EXPORT int cuModuleGetFunction(void **fn, void *module, const char *name) {
  (void)module;
  if (strcmp(name, "missing") == 0)
    return 500; /* CUDA_ERROR_NOT_FOUND */
  *fn = (void *)strdup(name);
  return 0;
}
EXPORT int cuFuncSetAttribute(void *fn, int attribute, int value) {
  (void)fn;
  last_attr = attribute;
  last_attr_value = value;
  return 0;
}
EXPORT int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned smem, void *stream, void **params,
                          void **extra) {
  (void)extra;
  strncpy(last_kernel, (const char *)fn, sizeof(last_kernel) - 1);
  if (strcmp(last_kernel, "fail_launch") == 0)
    return 719; /* CUDA_ERROR_LAUNCH_FAILED */
  last_grid[0] = gx; last_grid[1] = gy; last_grid[2] = gz;
  last_block[0] = bx; last_block[1] = by; last_block[2] = bz;
  last_smem = smem;
  last_stream = stream;
  for (int i = 0; i < args_expected && i < 32; ++i)
    memcpy(&last_args[i], params[i], sizeof(uint64_t));
  if (launches < FAKE_LOG) {
    memcpy(launch_kernel[launches], last_kernel, sizeof last_kernel);
    memcpy(launch_grid[launches], last_grid, sizeof last_grid);
    memcpy(launch_args[launches], last_args, sizeof last_args);
    ++launches;
  }
  return 0;
}
EXPORT int cuGetErrorName(int error, const char **text) {
  *text = error == 101 ? "CUDA_ERROR_INVALID_DEVICE" : error == 500 ? "CUDA_ERROR_NOT_FOUND"
        : error == 719 ? "CUDA_ERROR_LAUNCH_FAILED" : 0;
  return *text ? 0 : 1;
}
EXPORT int cuGetErrorString(int error, const char **text) {
  *text = error == 101 ? "invalid device ordinal" : error == 500 ? "named symbol not found"
        : error == 719 ? "unspecified launch failure" : 0;
  return *text ? 0 : 1;
}

/* Read-back for the test. */
EXPORT void fake_expect_args(int n) { args_expected = n; }
EXPORT int fake_ctx_depth(void) { return ctx_depth; }
EXPORT int fake_module_loads(void) { return module_loads; }
EXPORT const void *fake_last_image(void) { return last_image; }
EXPORT int fake_last_attr(void) { return last_attr; }
EXPORT int fake_last_attr_value(void) { return last_attr_value; }
EXPORT const unsigned *fake_last_grid(void) { return last_grid; }
EXPORT const unsigned *fake_last_block(void) { return last_block; }
EXPORT unsigned fake_last_smem(void) { return last_smem; }
EXPORT void *fake_last_stream(void) { return last_stream; }
EXPORT const char *fake_last_kernel(void) { return last_kernel; }
EXPORT const uint64_t *fake_last_args(void) { return last_args; }
EXPORT void fake_clear_launches(void) { launches = 0; }
EXPORT int fake_launches(void) { return launches; }
EXPORT const char *fake_launch_kernel(int i) { return launch_kernel[i]; }
EXPORT const unsigned *fake_launch_grid(int i) { return launch_grid[i]; }
EXPORT const uint64_t *fake_launch_args(int i) { return launch_args[i]; }
