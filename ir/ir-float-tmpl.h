/* ir-float-tmpl.h - instantiates a kernel template once per float dtype the kernels run:
 * float32 (the executor's own precision) and float64 (the reference ir_graph_to_f64 computes,
 * issue 18). A template is a header of ordinary kernel code written in terms of the macros
 * below; an op file instantiates it with
 *
 *     #define IR_TMPL "ops-conv-kern.h"
 *     #include "ir-float-tmpl.h"
 *
 * which defines every function FN(name) of the template twice, as name_f32 and name_f64, and
 * dispatches with IR_KERNEL_BY_FLOAT (ir-impl.h). Both instances are the same algorithm: the
 * float32 one is the code as it was written for float32 (its speed and results unchanged), the
 * float64 one has double operands and accumulators and calls BLAS's d-routines.
 *
 * Inside a template:
 *   FT          the element type (float / double)
 *   FN(name)    name_f32 / name_f64
 *   FT_DTYPE    IR_F32 / IR_F64
 *   FT_IS_F64   0 / 1
 *   FT_GEMM     cblas_sgemm / cblas_dgemm (the file includes <cblas.h>)
 *   FT_EXP, FT_LOG, FT_SQRT, FT_TANH, FT_FABS, FT_ERF, FT_POW: libm's f / plain variants.
 * Keep accumulators that were double in the float32 code double in both. */
#ifndef IR_TMPL
#error "define IR_TMPL (the template's file name) before including ir-float-tmpl.h"
#endif

#define FT float
#define FN(name) name##_f32
#define FT_DTYPE IR_F32
#define FT_IS_F64 0
#define FT_GEMM cblas_sgemm
#define FT_EXP expf
#define FT_LOG logf
#define FT_SQRT sqrtf
#define FT_TANH tanhf
#define FT_FABS fabsf
#define FT_ERF erff
#define FT_POW powf
#include IR_TMPL
#undef FT
#undef FN
#undef FT_DTYPE
#undef FT_IS_F64
#undef FT_GEMM
#undef FT_EXP
#undef FT_LOG
#undef FT_SQRT
#undef FT_TANH
#undef FT_FABS
#undef FT_ERF
#undef FT_POW

#define FT double
#define FN(name) name##_f64
#define FT_DTYPE IR_F64
#define FT_IS_F64 1
#define FT_GEMM cblas_dgemm
#define FT_EXP exp
#define FT_LOG log
#define FT_SQRT sqrt
#define FT_TANH tanh
#define FT_FABS fabs
#define FT_ERF erf
#define FT_POW pow
#include IR_TMPL
#undef FT
#undef FN
#undef FT_DTYPE
#undef FT_IS_F64
#undef FT_GEMM
#undef FT_EXP
#undef FT_LOG
#undef FT_SQRT
#undef FT_TANH
#undef FT_FABS
#undef FT_ERF
#undef FT_POW

#undef IR_TMPL
