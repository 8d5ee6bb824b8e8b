/* tessera/onnx.h — ONNX models in and out: a model file as a module that runs on any device with
 * autograd (included by tessera.h). docs/ONNX.md has the operator table and the rules. */
#ifndef TESSERA_ONNX_H
#define TESSERA_ONNX_H

/* Zero means default. */
typedef struct ts_onnx_opts {
    ts_device device; /* where the parameters go (the default device when zero) */
    /* Inference rewrites (constant folding of shape sub-graphs is always on): BatchNormalization
     * folded into the Conv before it, Conv + Relu/Clip fused. A rewritten model gives the same
     * outputs within float32 rounding but its parameters are the folded ones: keep the rewrites
     * off (the default) to fine-tune or save a model with the file's parameters. */
    bool optimize;
    /* Parse only: check the file and every operator (ts_onnx_info), load no weights. */
    bool no_weights;
} ts_onnx_opts;

/* Loads an ONNX model (opsets 1-17 of the default domain; what each operator supports is in
 * docs/ONNX.md) as a module: its initializers are the module's parameters (floating ones) and
 * buffers (integer ones, BatchNormalization's running statistics), named as in the file ("a.b.c" is
 * the parameter "c" of the child module "a.b"), so ts_module_save, ts_module_to, optimizers and DDP
 * work on it unchanged. External data files are read from the model's folder. An operator or type
 * Tessera lacks is TS_ERR_UNSUPPORTED at load, naming the node, its op type and opset; a malformed
 * file is TS_ERR_FORMAT naming what is wrong. ts_forward(m, x) runs a model of one input and
 * returns its first output; ts_onnx_run runs any. */
TS_API ts_module *ts_onnx_load(const char *path, ts_onnx_opts o);
/* The same from a buffer; external data is looked up in base_dir (NULL: refused). */
TS_API ts_module *ts_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                                      ts_onnx_opts o);
/* true when m was made by ts_onnx_load */
TS_API bool ts_onnx_is_model(ts_module *m);

/* What a graph value is: a tensor, a sequence of tensors, or an optional (a tensor, a sequence or
 * nothing). Sequences and optionals travel as ts_tensor handles: see ts_onnx_sequence below. */
typedef enum ts_onnx_kind { TS_ONNX_TENSOR = 0, TS_ONNX_SEQUENCE, TS_ONNX_OPTIONAL } ts_onnx_kind;

/* The graph's inputs (initializers excluded) and outputs, in the file's order. */
typedef struct ts_onnx_value_info {
    const char *name;                   /* borrowed from the model */
    ts_dtype dtype;                     /* TS_DTYPE_DEFAULT when the file declares no tensor type */
    int ndim;                           /* -1: rank unknown */
    int64_t dims[TS_MAX_DIMS];          /* -1 for a symbolic or unknown dimension */
    const char *dim_names[TS_MAX_DIMS]; /* the symbol ("batch_size") or NULL */
    /* a sequence or an optional: dtype is the element type of the tensors it holds and ndim -1 */
    ts_onnx_kind kind;
} ts_onnx_value_info;
TS_API int ts_onnx_num_inputs(ts_module *m);
TS_API int ts_onnx_num_outputs(ts_module *m);
TS_API ts_status ts_onnx_input_info(ts_module *m, int i, ts_onnx_value_info *out);
TS_API ts_status ts_onnx_output_info(ts_module *m, int i, ts_onnx_value_info *out);

/* Runs the graph: inputs[i] for the i-th graph input (on the model's device; symbolic dimensions
 * take the sizes given, fixed ones must match), outputs[0..n_outputs-1] get the first n_outputs
 * outputs, owned like any op's result. On failure every output is NULL and the error names the
 * node. Differentiable: ts_backward through the outputs reaches the parameters. A sequence or
 * optional input or output is a container (ts_onnx_sequence below), on its elements' device. */
TS_API ts_status ts_onnx_run(ts_module *m, int n_inputs, ts_tensor *const *inputs, int n_outputs,
                             ts_tensor **outputs);

/* ------------------------------------------------------------------ sequences and optionals
 * ONNX's sequence and optional values are containers that travel through ts_onnx_run's inputs and
 * outputs as ts_tensor handles: a container is an empty tensor (shape [0]; dtype the element type
 * of the tensors it holds; on their device) that holds one reference to each element, freed with
 * the container (ts_release, scopes) like any tensor. Tensor ops see only the empty tensor: read a
 * container with the functions here. The elements are shared, not copied. */
/* A sequence of tensors[0..n-1] (one dtype, one device; tensors may be NULL when n is 0).
 * o.dtype and o.device: an empty sequence's element type (float32 when zero) and device (the
 * default device); when given for a non-empty one, the tensors must match them. */
TS_API ts_tensor *ts_onnx_sequence(int n, ts_tensor *const *tensors, ts_opts o);
/* An optional holding value (a tensor or a sequence), or nothing when value is NULL and no error
 * is pending (o.dtype and o.device as for an empty sequence). */
TS_API ts_tensor *ts_onnx_optional(ts_tensor *value, ts_opts o);
TS_API bool ts_onnx_is_sequence(ts_tensor *t); /* false for a tensor, an optional or NULL */
TS_API bool ts_onnx_is_optional(ts_tensor *t);
/* -1 with TS_ERR_ARG when seq is no sequence */
TS_API int64_t ts_onnx_sequence_length(ts_tensor *seq);
/* element i (negative: from the end), owned like any op's result; TS_ERR_ARG out of range */
TS_API ts_tensor *ts_onnx_sequence_at(ts_tensor *seq, int64_t i);
TS_API bool ts_onnx_optional_has_value(ts_tensor *opt); /* false with TS_ERR_ARG when no optional */
/* the value (a tensor or a sequence), owned like any op's result; TS_ERR_STATE when empty */
TS_API ts_tensor *ts_onnx_optional_value(ts_tensor *opt);

/* A description of a model for `tessera info`: producer, IR version, opsets, operators with their
 * counts, parameter count, inputs and outputs. malloc'ed text; free() it. NULL on error. */
TS_API char *ts_onnx_describe(ts_module *m);

/* Reads a serialized ONNX TensorProto (the backend test suite's input_N.pb / output_N.pb) onto dev.
 * *name (may be NULL) gets the tensor's name, malloc'ed ("" when none). */
TS_API ts_tensor *ts_onnx_tensor_load(const char *path, ts_device dev, char **name);
TS_API ts_tensor *ts_onnx_tensor_parse(const void *data, size_t size, ts_device dev, char **name);

/* ------------------------------------------------------------------ export */
/* Zero means default. */
typedef struct ts_onnx_export_opts {
    bool dynamic_batch;             /* input and output dim 0 symbolic ("batch") */
    int opset;                      /* 0 -> 17 (the only one written so far) */
    const char *const *input_names; /* NULL -> "input", "output" (+ index when several) */
    const char *const *output_names;
    const char *producer; /* NULL -> "tessera" */
} ts_onnx_export_opts;

/* Writes m as an ONNX model (opset 17) at path, atomically (the old file or the new one, never half
 * of one): one forward of m (ts_forward, so n_inputs is 1) runs on example_inputs in eval mode
 * under a trace that records each op with its attributes, and the recorded ops become the graph
 * (in their order; ops whose results the output never reads are dropped). The module's parameters
 * and buffers become initializers named by their state-dict names (ts_module_state_dict); other
 * constants get generated names. Shapes are the example's, except that with dynamic_batch dim 0 of
 * the input and the output is the symbol "batch" (reshapes to the example's batch size copy it from
 * their input instead). An op with no ONNX form is TS_ERR_UNSUPPORTED naming it; so is a tensor the
 * forward made with an op the trace does not know (named by its autograd node's op). The module is
 * left as it was (training mode restored). docs/ONNX.md lists the ops. */
TS_API ts_status ts_onnx_export(ts_module *m, int n_inputs, ts_tensor *const *example_inputs,
                                const char *path, ts_onnx_export_opts o);

/* ------------------------------------------------------------------ quantization
 * ts_onnx_quantize writes a float32 ONNX model (opset 13+) as the quantized model ONNX Runtime's
 * quantizer writes, which Tessera's importer (and ORT) run in integers (docs/QUANTIZATION.md,
 * "tessera quantize"). Static (ORT's quantize_static, QDQ format, CalibrationMethod.MinMax): the
 * float model runs on the calibration batches; each Conv / MatMul / Gemm (with a float32 weight
 * initializer) and Add gets QuantizeLinear -> DequantizeLinear pairs on its activation inputs and
 * its output (per-tensor uint8, or int8 with int8_activations, from the min / max over all
 * batches), int8 symmetric weights per output channel and int32 biases of scale x_scale * w_scale.
 * Dynamic (ORT's quantize_dynamic): each MatMul / Gemm with a weight initializer becomes
 * DynamicQuantizeLinear + MatMulInteger over a per-tensor symmetric int8 weight. int4 is refused
 * (TS_ERR_UNSUPPORTED). A model with nothing to quantize, or already quantized, is TS_ERR_ARG. */
typedef enum ts_onnx_quant_mode {
    TS_ONNX_QUANT_STATIC = 0,
    TS_ONNX_QUANT_DYNAMIC,
    TS_ONNX_QUANT_INT4 /* not supported yet */
} ts_onnx_quant_mode;
/* One calibration batch: sets inputs[0..n_inputs-1] (the graph's inputs in order; new references,
 * released by the quantizer) and returns 1; 0 when there are no more; -1 on error (error set). */
typedef int (*ts_onnx_calib_fn)(void *user, int n_inputs, ts_tensor **inputs);
/* Zero means default. */
typedef struct ts_onnx_quantize_opts {
    ts_onnx_quant_mode mode;
    /* static: the calibration batches, either n_calib x (the graph's inputs) tensors, batch-major
     * (borrowed), or calib_fn called until it returns 0 */
    int n_calib;
    ts_tensor *const *calib;
    ts_onnx_calib_fn calib_fn;
    void *calib_user;
    void (*progress)(void *user, int batches_done); /* after each calibration batch (may be NULL) */
    bool int8_activations;   /* static: int8 activations (ORT's QInt8) instead of uint8 */
    bool per_tensor_weights; /* static: one weight scale per tensor instead of per channel */
    ts_device device;        /* where calibration runs (the default device when zero) */
    const char *producer;    /* the written model's producer_name (NULL: the input's) */
} ts_onnx_quantize_opts;
typedef struct ts_onnx_quantize_report {
    int nodes_quantized;    /* Conv / MatMul / Gemm / Add nodes given integer forms */
    int tensors_calibrated; /* activations with a QuantizeLinear / DequantizeLinear pair */
    int calib_batches;
    size_t bytes_before, bytes_after; /* the serialized models */
} ts_onnx_quantize_report;
/* Reads in_path, writes out_path atomically; report (may be NULL) gets what was done. */
TS_API ts_status ts_onnx_quantize(const char *in_path, const char *out_path,
                                  ts_onnx_quantize_opts o, ts_onnx_quantize_report *report);
/* The same from a serialized model in memory (external data looked up in base_dir). */
TS_API ts_status ts_onnx_quantize_buffer(const void *data, size_t size, const char *base_dir,
                                         const char *out_path, ts_onnx_quantize_opts o,
                                         ts_onnx_quantize_report *report);

#endif /* TESSERA_ONNX_H */
