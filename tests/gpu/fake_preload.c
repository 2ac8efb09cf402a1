/* Stands in for libtraintime.so in the plumbing test of scripts/gpu-validate.sh: the script
 * needs a preloadable library, and this one does nothing, so the test runs without CUDA. */
int traintime_gpu_validate_fake_preload;
