// Closes the region kernel_isa_begin.h opened. Deliberately no include guard.
#pragma GCC pop_options
