// DSPARK_CLONES: a hot loop compiled for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the baseline;
// the loader picks one per CPU (GCC target_clones). Elsewhere it expands to nothing.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DSPARK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define DSPARK_HAS_FLOAT16 1
#else
#define DSPARK_CLONES
#define DSPARK_HAS_FLOAT16 0
#endif
