/* gpu-registry.c - the one file of magpie that tests the CUDA build flag (DESIGN.md: no other .c
 * file contains #ifdef CUDA). It hands the CPU side the GPU back-ends that exist in this build:
 *  - prof_cuda_backend(), the measured cost back-end that profiler/prof.h declares;
 *  - pet_cuda_backend(), PET's verification back-end that rules/pet.h declares
 *    (gpu/gpu-pet.cu defines gpu_pet_backend()).
 *
 * CMakeLists.txt defines MAGPIE_HAVE_CUDA=1 for this file only, and only when the CUDA toolkit,
 * cuBLAS and cuDNN were found (cmake/MagpieCuda.cmake) and gpu/ holds .cu sources. The CUDA
 * sources must then define, with C linkage:
 *     const prof_backend *gpu_prof_backend(void);
 * returning a back-end named "cuda" whose available() reports a missing device or driver at run
 * time, so that one binary serves machines with and without a GPU.
 *
 * Linking: magpie_gpu implements profiler's interface and links magpie_profiler; profiler only
 * declares prof_cuda_backend. Every executable links magpie_gpu after magpie_profiler, which
 * resolves the symbol without weak symbols or a dependency from profiler to gpu. */
#include "pet.h"
#include "prof.h"

#if defined(MAGPIE_HAVE_CUDA) && MAGPIE_HAVE_CUDA
const prof_backend *gpu_prof_backend(void); /* gpu/gpu-cost.cu */
const pet_backend *gpu_pet_backend(void);   /* gpu/gpu-pet.cu */

const prof_backend *prof_cuda_backend(void) {
    return gpu_prof_backend();
}
const pet_backend *pet_cuda_backend(void) {
    return gpu_pet_backend();
}
#else
const prof_backend *prof_cuda_backend(void) {
    return NULL;
}
const pet_backend *pet_cuda_backend(void) {
    return NULL;
}
#endif
