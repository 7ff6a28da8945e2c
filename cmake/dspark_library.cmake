# dspark_library(name): one static library per folder under src/ (the layout rule: each folder under src/ is one
# library, dspark_<folder>, and its headers are included as "<folder>/<file>.h" from src/).
function(dspark_library name)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(dspark_${name} STATIC ${srcs})
  target_include_directories(dspark_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
endfunction()

# Per-file ISA flags: *_avx2.cpp, *_avx512.cpp and *_amx.cpp (AMX-INT8 + AVX-512) are compiled for their ISA only; everything else
# stays baseline x86-64 so the binary runs anywhere and dispatches at run time. GCC 12 reports
# false "maybe-uninitialized" / "uninitialized" warnings inside its own AVX-512 intrinsics (the
# reductions, and the _mm512_undefined_ps() pass-through of shuffles and permutes); silenced there.
function(dspark_kernel_isa_flags target)
  get_target_property(srcs ${target} SOURCES)
  foreach(src IN LISTS srcs)
    if(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mavx512vnni;-mavx2;-mfma;-mf16c;-mbmi2;-Wno-maybe-uninitialized;-Wno-uninitialized")
    elseif(src MATCHES "_amx\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mamx-tile;-mamx-int8;-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni;-mavx512dq;-mavx2;-mfma;-mf16c;-mbmi2")
    elseif(src MATCHES "_fastmath\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-ffast-math;-fopenmp-simd")
    elseif(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
    endif()
  endforeach()
endfunction()
