// Opens the instruction-set level one copy of the CPU kernels is compiled for (kernel_isa.h). A kernel
// source includes it after every standard and project header it needs, and kernel_isa_end.h at its end.
// Everything defined in between gets the level's target options; what was defined before (the standard
// library's templates, core/) stays at the portable baseline, so a template instantiated by two levels
// has one baseline body and the linker can never hand an AVX2 machine an AVX-512 copy of it.
// Deliberately no include guard: each kernel source opens and closes the region once.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/kernel_isa.h"

#pragma GCC push_options
#if TESSERA_KERNEL_LEVEL == TESSERA_KERNEL_LEVEL_AVX512
// 512-bit vectors for the auto-vectorised loops too (GCC's generic tuning prefers 256).
#pragma GCC target("arch=x86-64-v4,prefer-vector-width=512")
#else
#pragma GCC target("arch=x86-64-v3")
#endif
