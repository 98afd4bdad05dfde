/* ir-onnx.h - private to ir/: the TensorProto codec that ONNX import (initializers, TENSOR
 * attributes) and export share. Separate from ir-impl.h because it pulls in the generated
 * protobuf-c header, which only the ONNX files need. */
#ifndef MAGPIE_IR_ONNX_H
#define MAGPIE_IR_ONNX_H

#include "ir-impl.h"
#include "onnx.pb-c.h"

/* Largest tensor (in bytes) a file may describe: far above any real model, low enough that
 * element counts, byte counts and FLOP counts never overflow 64 bits downstream. */
#define IR_ONNX_MAX_TENSOR_BYTES ((int64_t)1 << 48)

/* The default-domain opsets the importer reads. Each op follows its own versions within them
 * (docs/onnx-opsets.md lists them); above, a file is refused as a whole. */
#define IR_ONNX_OPSET_MIN 13
#define IR_ONNX_OPSET_MAX 23

/* Name of an ONNX TensorProto.DataType for messages ("float32", "string", "uint16"...). */
const char *ir_onnx_dtype_name(int onnx_type);
/* " (float8, int4, float4 and e8m0 types are out of scope)" for those types, "" otherwise: the
 * tail of a refusal, so that it reads as a decision rather than a gap. */
const char *ir_onnx_dtype_scope_note(int onnx_type);

/* Checks a shape read from a file: rank <= IR_MAX_RANK (else IR_ERR_UNSUPPORTED), no negative
 * dimension and a size within IR_ONNX_MAX_TENSOR_BYTES (else IR_ERR_INVALID). `what` names the
 * tensor in the message ("initializer 'w'"). */
ir_status ir_onnx_check_dims(int rank, const int64_t *dims, ir_dtype t, const char *what,
                             ir_diag *d);

/* Decodes t's data (raw_data, or the typed field the dtype uses) into a new blob. Unsupported
 * dtype or external data: IR_ERR_UNSUPPORTED; data whose length does not match the dims:
 * IR_ERR_INVALID. Messages start with `what`. On success *blob holds one reference. */
ir_status ir_onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, ir_dtype *dtype,
                                ir_shape *shape, ir_blob **blob, ir_diag *d);

/* Fills *t (already ONNX__TENSOR_PROTO__INIT'ed) to describe the given tensor with raw_data
 * pointing into blob (not copied: the blob must outlive the packing). dims are allocated in
 * arena a. False on out of memory. */
bool ir_onnx_tensor_encode(Onnx__TensorProto *t, ir_arena *a, const char *name, ir_dtype dtype,
                           const ir_shape *shape, ir_blob *blob);

/* ---------------------------------------------------------------- external data
 * (ir-onnx-external.c) */

/* True when t keeps its bytes in an external file (data_location = EXTERNAL). */
bool ir_onnx_tensor_is_external(const Onnx__TensorProto *t);
/* Reads such a tensor: its external_data `location` relative to model_path's folder, `offset`
 * and `length` checked against the file's size and the dims. Messages start with `what` and name
 * the data file and the cause. On success *blob holds one reference. */
ir_status ir_onnx_external_decode(const Onnx__TensorProto *t, const char *model_path,
                                  const char *what, ir_dtype *dtype, ir_shape *shape,
                                  ir_blob **blob, ir_diag *d);

/* Largest file protobuf can parse (2^31 - 1 bytes): export never writes a bigger one. */
#define IR_ONNX_PROTOBUF_LIMIT ((size_t)INT32_MAX)
/* Initializers this large or larger go to the data file (onnx's size_threshold). */
#define IR_ONNX_EXTERNAL_MIN_BYTES 1024
#define IR_ONNX_EXTERNAL_ALIGN 64

/* The data file's contents: n tensors, tensor i's bytes at offsets[i]. */
typedef struct ir_onnx_external_plan {
    int n;
    const void **data;
    size_t *lengths;
    int64_t *offsets;
} ir_onnx_external_plan;
/* "m.onnx" -> "m.onnx.data" (the name only, no folder). */
void ir_onnx_external_name(const char *model_path, char *buf, size_t n);
/* Writes the data file atomically, zeros between the aligned tensors. */
ir_status ir_onnx_external_write(const char *data_path, const ir_onnx_external_plan *p, ir_diag *d);

/* Initializers that export writes for constants the importer folded (not from the file's
 * initializers) carry this doc_string, so a re-import keeps them non-trainable. */
#define IR_ONNX_FOLDED_DOC "magpie:folded-constant"

#endif
