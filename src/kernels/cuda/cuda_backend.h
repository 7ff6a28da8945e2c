// The CUDA backend's entry points for the backend registry (kernels/backend_registry.cpp), in plain
// C++ so the registry needs no CUDA headers. Only in builds configured with a CUDA compiler
// (DSPARK_HAVE_CUDA; CMakeLists.txt, DSPARK_CUDA).
#pragma once

#include <string>

#include "kernels/backend.h"

namespace dspark::kernels::cuda {

// True when the CUDA runtime finds a device it can use (asked once; the answer is kept).
bool available();
// Why not, in the runtime's words and naming the device where there is one ("" when available()).
std::string unavailable_reason();
// The backend on device 0; nullptr when !available().
const Backend* backend();

}  // namespace dspark::kernels::cuda
