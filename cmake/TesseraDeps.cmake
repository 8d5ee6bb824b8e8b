# TesseraDeps.cmake — finds threads, OpenMP, a CPU BLAS, cJSON, libzip, zlib, MPI and CUDA; sets
# TS_DEP_LIBS / TS_DEP_DEFS (and TS_PC_LIBS for tessera.pc).
set(TS_DEP_LIBS "")
set(TS_DEP_DEFS "")
set(TS_PC_LIBS "-lm -lpthread")

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

# TS_OPENMP=OFF: kernels on one thread (the ThreadSanitizer build: libgomp is not instrumented)
option(TS_OPENMP "Run the CPU kernels on OpenMP threads when OpenMP is found" ON)
if(TS_OPENMP)
  find_package(OpenMP COMPONENTS C)
endif()
if(OpenMP_C_FOUND)
  list(APPEND TS_DEP_LIBS OpenMP::OpenMP_C)
  list(APPEND TS_DEP_DEFS TS_HAVE_OPENMP=1)
  set(TS_PC_LIBS "${TS_PC_LIBS} ${OpenMP_C_FLAGS}")
  message(STATUS "Tessera: OpenMP found")
else()
  message(STATUS "Tessera: OpenMP not found: CPU kernels run on one thread")
endif()

# cJSON parses safetensors headers (Debian: libcjson-dev, header <cjson/cJSON.h>)
find_path(TS_CJSON_INCLUDE cjson/cJSON.h)
find_library(TS_CJSON_LIB NAMES cjson)
if(NOT TS_CJSON_INCLUDE OR NOT TS_CJSON_LIB)
  message(FATAL_ERROR "Tessera needs cJSON for safetensors files: install libcjson-dev "
                      "(apt-get install libcjson-dev, or `make deps`), or point CMAKE_PREFIX_PATH at "
                      "a cJSON install providing cjson/cJSON.h and libcjson")
endif()
list(APPEND TS_DEP_LIBS ${TS_CJSON_LIB})
include_directories(SYSTEM ${TS_CJSON_INCLUDE})
set(TS_PC_LIBS "${TS_PC_LIBS} -lcjson")
message(STATUS "Tessera: cJSON ${TS_CJSON_LIB}")

# libzip reads PyTorch checkpoints (ts_load_pt: torch.save's zip; Debian: libzip-dev, <zip.h>)
find_path(TS_LIBZIP_INCLUDE zip.h)
find_library(TS_LIBZIP_LIB NAMES zip)
if(NOT TS_LIBZIP_INCLUDE OR NOT TS_LIBZIP_LIB)
  message(FATAL_ERROR "Tessera needs libzip for PyTorch checkpoints (ts_load_pt): install "
                      "libzip-dev (apt-get install libzip-dev, or `make deps`), or point "
                      "CMAKE_PREFIX_PATH at a libzip install providing zip.h and libzip")
endif()
list(APPEND TS_DEP_LIBS ${TS_LIBZIP_LIB})
include_directories(SYSTEM ${TS_LIBZIP_INCLUDE})
set(TS_PC_LIBS "${TS_PC_LIBS} -lzip")
message(STATUS "Tessera: libzip ${TS_LIBZIP_LIB}")

# DLPack's header (Debian: libdlpack-dev, <dlpack/dlpack.h>): ts_to_dlpack / ts_from_dlpack
find_path(TS_DLPACK_INCLUDE dlpack/dlpack.h)
if(NOT TS_DLPACK_INCLUDE)
  message(FATAL_ERROR "Tessera needs DLPack's header for ts_to_dlpack: install libdlpack-dev "
                      "(apt-get install libdlpack-dev, or `make deps`), or point CMAKE_PREFIX_PATH "
                      "at a folder holding include/dlpack/dlpack.h")
endif()
include_directories(SYSTEM ${TS_DLPACK_INCLUDE})

# zlib reads gzip'ed IDX files (Debian: zlib1g-dev); stb_image, when present, decodes the images of
# ts_image_folder (Debian: libstb-dev, header <stb/stb_image.h>, library -lstb).
find_package(ZLIB)
if(NOT ZLIB_FOUND)
  message(FATAL_ERROR "Tessera needs zlib for gzip'ed datasets: install zlib1g-dev "
                      "(apt-get install zlib1g-dev, or `make deps`)")
endif()
list(APPEND TS_DEP_LIBS ZLIB::ZLIB)
set(TS_PC_LIBS "${TS_PC_LIBS} -lz")
find_path(TS_STB_INCLUDE stb/stb_image.h)
find_library(TS_STB_LIB NAMES stb)
if(TS_STB_INCLUDE AND TS_STB_LIB)
  list(APPEND TS_DEP_LIBS ${TS_STB_LIB})
  list(APPEND TS_DEP_DEFS TS_HAVE_STB=1)
  include_directories(SYSTEM ${TS_STB_INCLUDE})
  set(TS_PC_LIBS "${TS_PC_LIBS} -lstb")
  message(STATUS "Tessera: stb_image ${TS_STB_LIB} (image folders)")
else()
  message(STATUS "Tessera: no stb_image (libstb-dev): ts_image_folder is unsupported")
endif()

# MPI (Debian: libopenmpi-dev) carries ts_dist_* across processes and machines. Without it the
# library still builds: a world of one works, a launcher asking for more ranks is an error.
option(TS_MPI "Build the distributed backend on MPI when found" ON)
set(TS_HAVE_MPI OFF)
if(TS_MPI)
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(TS_HAVE_MPI ON)
    list(APPEND TS_DEP_LIBS MPI::MPI_C)
    list(APPEND TS_DEP_DEFS TS_HAVE_MPI=1)
    set(TS_PC_LIBS "${TS_PC_LIBS} -lmpi")
    message(STATUS "Tessera: MPI ${MPI_C_VERSION} (${MPIEXEC_EXECUTABLE})")
  else()
    message(STATUS "Tessera: no MPI (libopenmpi-dev): ts_dist_* runs a world of one")
  endif()
endif()

set(TS_HAVE_CBLAS OFF)
if(TS_BLAS)
  # Prefer OpenBLAS built with OpenMP (Debian's libopenblas-openmp-dev): it shares libgomp's thread
  # pool with Tessera's kernels, where the pthreads build runs a second pool that fights it.
  find_path(TS_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas-openmp openblas openblas-pthread)
  find_library(TS_OPENBLAS_LIB NAMES openblas openblaso openblasp
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
  if(NOT TS_OPENBLAS_LIB)
    find_library(TS_OPENBLAS_LIB NAMES openblas openblaso openblasp)
  endif()
  if(TS_CBLAS_INCLUDE AND TS_OPENBLAS_LIB)
    set(TS_HAVE_CBLAS ON)
    list(APPEND TS_DEP_LIBS ${TS_OPENBLAS_LIB})
    list(APPEND TS_DEP_DEFS TS_HAVE_CBLAS=1)
    include_directories(SYSTEM ${TS_CBLAS_INCLUDE})
    set(TS_PC_LIBS "${TS_PC_LIBS} -lopenblas")
    message(STATUS "Tessera: CPU BLAS ${TS_OPENBLAS_LIB}")
  endif()
endif()
if(NOT TS_HAVE_CBLAS)
  message(STATUS "Tessera: no CPU BLAS found: using the built-in blocked GEMM")
endif()

# LAPACKE (Debian: liblapacke-dev) runs torch.linalg's decompositions on the host (src/ops/linalg*.c);
# without it those ops fail with TS_ERR_UNSUPPORTED.
find_path(TS_LAPACKE_INCLUDE lapacke.h)
find_library(TS_LAPACKE_LIB NAMES lapacke)
if(TS_LAPACKE_INCLUDE AND TS_LAPACKE_LIB)
  list(APPEND TS_DEP_LIBS ${TS_LAPACKE_LIB})
  list(APPEND TS_DEP_DEFS TS_HAVE_LAPACKE=1)
  include_directories(SYSTEM ${TS_LAPACKE_INCLUDE})
  set(TS_PC_LIBS "${TS_PC_LIBS} -llapacke")
  message(STATUS "Tessera: LAPACKE ${TS_LAPACKE_LIB} (torch.linalg)")
else()
  message(STATUS "Tessera: no LAPACKE (liblapacke-dev): torch.linalg decompositions unsupported")
endif()

# oneDNN (Debian: libdnnl-dev) runs the float32 GEMMs when found: its JIT kernels follow the CPU's
# feature flags, where OpenBLAS 0.3.21 falls back to AVX2 kernels on CPUs newer than itself.
option(TS_DNNL "Use oneDNN for float32 GEMMs when found" ON)
set(TS_HAVE_DNNL OFF)
if(TS_DNNL)
  find_path(TS_DNNL_INCLUDE dnnl.h PATH_SUFFIXES oneapi/dnnl)
  find_library(TS_DNNL_LIB NAMES dnnl)
  if(TS_DNNL_INCLUDE AND TS_DNNL_LIB)
    set(TS_HAVE_DNNL ON)
    list(APPEND TS_DEP_LIBS ${TS_DNNL_LIB})
    list(APPEND TS_DEP_DEFS TS_HAVE_DNNL=1)
    include_directories(SYSTEM ${TS_DNNL_INCLUDE})
    set(TS_PC_LIBS "${TS_PC_LIBS} -ldnnl")
    message(STATUS "Tessera: oneDNN ${TS_DNNL_LIB} (float32 GEMMs)")
  else()
    message(STATUS "Tessera: no oneDNN (libdnnl-dev): float32 GEMMs through the CPU BLAS")
  endif()
endif()

# CUDA (TS_CUDA=AUTO builds it whenever nvcc is found). The runtime, cuBLAS, cuFFT and cuSOLVER are
# required; cuDNN (TS_HAVE_CUDNN) and NCCL (TS_HAVE_NCCL) are optional: without cuDNN convolutions
# run as im2col + cuBLAS, without NCCL multi-GPU reductions go through peer copies. The build needs
# no GPU.
set(TS_CUDA_ENABLED OFF)
set(TS_CUDA_LIBS "")
set(TS_CUDA_DEFS "")
if(NOT TS_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  # The CUDA code built (docs/decisions/0040-cuda-code-for-the-machine.md): a
  # CMAKE_CUDA_ARCHITECTURES given by the user wins. Otherwise the GPUs nvidia-smi sees get their
  # machine code plus PTX (an H100 or H200: "90", sm_90 + compute_90), and a machine where it sees
  # none gets compute_90 PTX alone ("90-virtual": no ptxas, most of the CUDA build) compiled fast
  # (TS_CUDA_FAST_BUILD). Set before enable_language, which would otherwise pick nvcc's default.
  set(TS_CUDA_FAST_BUILD AUTO CACHE STRING "CUDA built to be checked, not run: PTX alone unless \
CMAKE_CUDA_ARCHITECTURES says, --Ofast-compile=max, host -O1 for .cu files (AUTO: no GPU seen)")
  set_property(CACHE TS_CUDA_FAST_BUILD PROPERTY STRINGS AUTO ON OFF)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL ""
     OR CMAKE_CUDA_ARCHITECTURES STREQUAL "${TS_CUDA_ARCH_CHOSEN}")
    set(ts_caps "")
    find_program(TS_NVIDIA_SMI nvidia-smi)
    if(TS_NVIDIA_SMI)
      execute_process(COMMAND ${TS_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                      OUTPUT_VARIABLE ts_smi RESULT_VARIABLE ts_smi_rc ERROR_QUIET TIMEOUT 20)
      if(ts_smi_rc EQUAL 0)
        string(REGEX MATCHALL "[0-9]+\\.[0-9]+" ts_smi "${ts_smi}")
        foreach(cap ${ts_smi})
          string(REPLACE "." "" cap ${cap})
          list(APPEND ts_caps ${cap})
        endforeach()
        list(REMOVE_DUPLICATES ts_caps)
      endif()
    endif()
    if(ts_caps AND NOT TS_CUDA_FAST_BUILD STREQUAL "ON")
      set(ts_arch "${ts_caps}") # each GPU's machine code + its PTX, for GPUs after it
      set(TS_CUDA_GPU_SEEN ON CACHE INTERNAL "")
    elseif(TS_CUDA_FAST_BUILD STREQUAL "OFF")
      set(ts_arch 90) # sm_90 + compute_90 PTX, for a GPU that is not here
      set(TS_CUDA_GPU_SEEN OFF CACHE INTERNAL "")
    else()
      set(ts_arch 90-virtual)
      set(TS_CUDA_GPU_SEEN OFF CACHE INTERNAL "")
    endif()
    set(CMAKE_CUDA_ARCHITECTURES "${ts_arch}" CACHE STRING
        "CUDA architectures (default: the GPUs nvidia-smi sees, 90-virtual without one)" FORCE)
    set(TS_CUDA_ARCH_CHOSEN "${ts_arch}" CACHE INTERNAL "the architectures Tessera chose")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # The fast build: the device code's fastest optimisation (nvcc 12.8+) and the .cu files' host
    # code at -O1, in this folder's variables (the cache keeps nvcc's defaults for a GPU build).
    set(TS_CUDA_FAST OFF)
    if(TS_CUDA_FAST_BUILD STREQUAL "ON" OR (TS_CUDA_FAST_BUILD STREQUAL "AUTO" AND
       NOT TS_CUDA_GPU_SEEN AND CMAKE_CUDA_ARCHITECTURES STREQUAL "${TS_CUDA_ARCH_CHOSEN}"))
      set(TS_CUDA_FAST ON)
      if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
        string(APPEND CMAKE_CUDA_FLAGS " --Ofast-compile=max")
      endif()
      string(REGEX REPLACE "(^| )-O[23]( |$)" "\\1-O1\\2" CMAKE_CUDA_FLAGS_RELEASE
             "${CMAKE_CUDA_FLAGS_RELEASE}")
    endif()
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cudart AND TARGET CUDA::cublas AND TARGET CUDA::cublasLt
       AND TARGET CUDA::cufft AND TARGET CUDA::cusolver)
      set(TS_CUDA_ENABLED ON)
      set(CMAKE_CUDA_STANDARD 17)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      set(CMAKE_CUDA_EXTENSIONS OFF)
      list(APPEND TS_CUDA_LIBS CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::cufft CUDA::cusolver)
      list(APPEND TS_CUDA_DEFS TS_HAVE_CUDA=1)
      # nvcc's kernel launch stubs use libstdc++'s static-guard and unwinding symbols: programs
      # built outside CMake link it too (CMake links with the host C++ compiler by itself)
      set(TS_PC_LIBS "${TS_PC_LIBS} -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcublasLt -lcufft -lcusolver -lstdc++")
      if(TS_CUDA_FAST)
        set(ts_how "fast build: to be checked, not run here")
      elseif(TS_CUDA_GPU_SEEN AND CMAKE_CUDA_ARCHITECTURES STREQUAL "${TS_CUDA_ARCH_CHOSEN}")
        set(ts_how "the GPUs nvidia-smi sees")
      else()
        set(ts_how "nvcc's optimisation")
      endif()
      message(STATUS "Tessera: CUDA ${CUDAToolkit_VERSION} found (architectures "
                     "${CMAKE_CUDA_ARCHITECTURES}: ${ts_how})")

      find_path(TS_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT
                PATH_SUFFIXES include)
      find_library(TS_CUDNN_LIB NAMES cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_ROOT
                   PATH_SUFFIXES lib lib64)
      if(TS_CUDNN_INCLUDE AND TS_CUDNN_LIB)
        list(APPEND TS_CUDA_LIBS ${TS_CUDNN_LIB})
        list(APPEND TS_CUDA_DEFS TS_HAVE_CUDNN=1)
        set(TS_PC_LIBS "${TS_PC_LIBS} -lcudnn")
        message(STATUS "Tessera: cuDNN ${TS_CUDNN_LIB}")
      else()
        message(STATUS "Tessera: no cuDNN: CUDA convolutions use im2col + cuBLAS")
      endif()

      find_path(TS_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_ROOT
                PATH_SUFFIXES include)
      find_library(TS_NCCL_LIB NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_ROOT
                   PATH_SUFFIXES lib lib64)
      if(TS_NCCL_INCLUDE AND TS_NCCL_LIB)
        list(APPEND TS_CUDA_LIBS ${TS_NCCL_LIB})
        list(APPEND TS_CUDA_DEFS TS_HAVE_NCCL=1)
        set(TS_PC_LIBS "${TS_PC_LIBS} -lnccl")
        message(STATUS "Tessera: NCCL ${TS_NCCL_LIB}")
      else()
        message(STATUS "Tessera: no NCCL")
      endif()
    endif()
  endif()
  if(TS_CUDA STREQUAL "ON" AND NOT TS_CUDA_ENABLED)
    message(FATAL_ERROR "TS_CUDA=ON but no CUDA toolkit (nvcc, cudart, cuBLAS, cuFFT, cuSOLVER) "
                        "was found")
  endif()
  if(NOT TS_CUDA_ENABLED)
    message(STATUS "Tessera: no CUDA toolkit: building without the CUDA backend")
  endif()
endif()

# ONNX (src/onnx/): protobuf-c's C code generated at build time from the onnx.proto that Debian's
# libonnx-dev installs (never committed), parsed by libprotobuf-c (libprotobuf-c-dev,
# protobuf-c-compiler). Without them the library still builds: ts_onnx_* answer TS_ERR_UNSUPPORTED.
option(TS_ONNX "Build ONNX import/export when protobuf-c and onnx.proto are found" ON)
set(TS_ONNX_ENABLED OFF)
if(TS_ONNX)
  find_program(TS_PROTOC_C NAMES protoc-c protoc-gen-c)
  find_path(TS_PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
  find_library(TS_PROTOBUF_C_LIB NAMES protobuf-c)
  find_file(TS_ONNX_PROTO onnx/onnx.proto PATHS /usr/include /usr/local/include)
  if(TS_PROTOC_C AND TS_PROTOBUF_C_INCLUDE AND TS_PROTOBUF_C_LIB AND TS_ONNX_PROTO)
    set(TS_ONNX_ENABLED ON)
    list(APPEND TS_DEP_LIBS ${TS_PROTOBUF_C_LIB})
    list(APPEND TS_DEP_DEFS TS_HAVE_ONNX=1)
    set(TS_PC_LIBS "${TS_PC_LIBS} -lprotobuf-c")
    message(STATUS "Tessera: ONNX through protobuf-c (${TS_PROTOC_C}, ${TS_ONNX_PROTO})")
  else()
    message(STATUS "Tessera: no protobuf-c or onnx.proto (protobuf-c-compiler, libprotobuf-c-dev, "
                   "libonnx-dev): ONNX support is left out")
  endif()
endif()
