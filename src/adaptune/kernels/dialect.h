/* adaptune portable kernel dialect: one kernel source compiles as CUDA (NVRTC) and as OpenCL C 1.2.
 *
 * Why: the same text runs on the H100 (CuPy RawModule) and on PoCL in CI, so every GPU kernel is checked
 * against a NumPy/SciPy reference without a GPU. Only what both languages share is exposed here:
 * 32-bit atomics, block-level barriers, statically sized shared (local) memory. No warp shuffles:
 * reductions go through shared memory and barriers, which PoCL executes correctly.
 *
 * Rules for kernels written in this dialect:
 *   - every BARRIER() must be reached by all threads of the block (loops around barriers are uniform);
 *   - pointer parameters carry GLOBAL (or LOCAL for helper functions taking shared memory);
 *   - use the fixed-width names u8/u32/i32/u64/i64 and real_t (float unless ADAPTUNE_REAL is defined).
 */
#ifndef ADAPTUNE_DIALECT_H
#define ADAPTUNE_DIALECT_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ADAPTUNE_CUDA 1
typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;
#define KERNEL extern "C" __global__ void
#define DEVICE static __device__ __forceinline__
#define GLOBAL
#define LOCAL
#define SHARED __shared__
#define RESTRICT __restrict__
#define LID() ((u32)threadIdx.x)
#define GROUP_ID() ((u32)blockIdx.x)
#define GROUP_SIZE() ((u32)blockDim.x)
#define NUM_GROUPS() ((u32)gridDim.x)
#define BARRIER() __syncthreads()
#define ATOMIC_ADD_U32(p, v) atomicAdd((unsigned int *)(p), (unsigned int)(v))
#define ATOMIC_OR_U32(p, v) atomicOr((unsigned int *)(p), (unsigned int)(v))
#define ATOMIC_MAX_U32(p, v) atomicMax((unsigned int *)(p), (unsigned int)(v))
#define LOAD_RO(p) __ldg(&(p))
/* 4 neighbouring elements as one 16-byte access (V: float4, int4, uint4); p + e must be 16-byte aligned */
#define VLOAD4(V, p, e) (*(const V *)((p) + (e)))
#define VSTORE4(V, p, e, a, b, c, d) (*(V *)((p) + (e)) = make_##V(a, b, c, d))
#define ALIGNED16(p) ((((size_t)(p)) & 15) == 0)
#define F32_INF __int_as_float(0x7f800000)
#define F64_INF __longlong_as_double(0x7ff0000000000000LL)
#define F32_NAN __int_as_float(0x7fc00000)
#define F64_NAN __longlong_as_double(0x7ff8000000000000LL)
#else
#define ADAPTUNE_OPENCL 1
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
typedef uchar u8;
typedef uint u32;
typedef int i32;
typedef ulong u64;
typedef long i64;
#define KERNEL __kernel void
#define DEVICE static inline
#define GLOBAL __global
#define LOCAL __local
#define SHARED __local
#define RESTRICT restrict
#define LID() ((u32)get_local_id(0))
#define GROUP_ID() ((u32)get_group_id(0))
#define GROUP_SIZE() ((u32)get_local_size(0))
#define NUM_GROUPS() ((u32)get_num_groups(0))
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#define ATOMIC_ADD_U32(p, v) atomic_add((p), (u32)(v))
#define ATOMIC_OR_U32(p, v) atomic_or((p), (u32)(v))
#define ATOMIC_MAX_U32(p, v) atomic_max((p), (u32)(v))
#define LOAD_RO(p) (p)
#define VLOAD4(V, p, e) vload4(0, (p) + (e))
#define VSTORE4(V, p, e, a, b, c, d) vstore4((V)(a, b, c, d), 0, (p) + (e))
#define ALIGNED16(p) 1 /* vload4/vstore4 need only the element's alignment */
#define F32_INF INFINITY
#define F64_INF ((double)INFINITY)
#define F32_NAN NAN
#define F64_NAN ((double)NAN)
#endif

#ifdef ADAPTUNE_REAL_IS_DOUBLE
typedef double real_t;
#else
typedef float real_t;
#endif

#endif /* ADAPTUNE_DIALECT_H */
