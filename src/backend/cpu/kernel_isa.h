// Which copy of the CPU kernels a translation unit belongs to. The kernel sources are compiled once per
// instruction-set level (backend/CMakeLists.txt); each copy lives in its own namespace,
// tessera::ops::TESSERA_KERNEL_NS (isa_avx2, isa_avx512), and its table (kernel_table.h) is chosen at run
// time (backend/cpu_isa.h). Sources outside those copies (matmul, the tests) see the baseline namespace.
#pragma once

#define TESSERA_KERNEL_LEVEL_AVX2 1
#define TESSERA_KERNEL_LEVEL_AVX512 2

#ifndef TESSERA_KERNEL_NS
#define TESSERA_KERNEL_NS baseline
#define TESSERA_KERNEL_LEVEL TESSERA_KERNEL_LEVEL_AVX2
#endif
