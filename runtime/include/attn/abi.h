/*===- abi.h - the contract between attn-compile artifacts and the runtime -===*
 *
 * An artifact is a shared object compiled from one attn.kernel. It exports:
 *
 *   const char *attn_manifest(void);
 *     The manifest: a JSON object whose one schema is
 *     runtime/python/attn/manifest.schema.json (described in docs/artifacts.md):
 *     abi (ATTN_ABI_VERSION), kernel, normalizer, algorithm, splits (how the
 *     runtime may divide a slice into calls), denominator, mask,
 *     params (name, shape, init: learnable scalars in kernel order, then the
 *     score's weights; P counts every element, weights flattened row-major),
 *     head_dim (optional), inputs (name, element, shape, learnable, init: one per
 *     tensor input, in argument order), contract, dtypes, devices, and cuda
 *     (targets, backend, kernels) exactly when devices lists cuda.
 *     It has one writer, the compiler's (lib/Codegen/Manifest.cpp, llvm::json;
 *     `attn-compile --emit=manifest` prints it), and one reader per language, each
 *     checking it against the schema: runtime/manifest.cpp (C++, nlohmann-json) and
 *     runtime/python/attn/manifest.py (Python). All three are checked against the
 *     golden files in test/manifest/.
 *
 *   For each dtype T in the manifest (f32: float, f64: double):
 *
 *   void _mlir_ciface_attn_forward_T(
 *       attn_memref2d *q,        [Nq, d]
 *       attn_memref2d *k,        [Nk, d]
 *       attn_memref2d *v,        [Nk, dv]
 *       attn_memref2d *o,        [Nq, dv]   written for rows [q_begin, q_end)
 *       attn_memref1d *row_max,  [Nq]       written: stabiliser m_i (0 for plain)
 *       attn_memref1d *row_sum,  [Nq]       written: C_i·e^(-m_i) (C_i for plain)
 *       attn_memref1d *row_count, [Nq]      written when `partial` (else not read)
 *       attn_memref1d *params,   [P]
 *       const attn_table *tables, one per input line, in that order (NULL when none)
 *       int64_t batch, int64_t head, the slice's batch index b and head index h,
 *                                which the regions see
 *       int64_t q_begin, int64_t q_end,
 *       int64_t kv_begin,        keys j < kv_begin are not visited (split-K)
 *       int64_t kv_len,          keys j >= kv_len are masked (padding)
 *       int64_t causal,          nonzero: keys j > i are masked
 *       int64_t partial,         nonzero: the rows are not finished; the call writes
 *                                its running state over its keys instead, for
 *                                attn_merge_T: o = Σ_j g(s_ij, m)·v_j (unnormalised),
 *                                row_max = m (its shift: the running max online, 0
 *                                plain), row_sum = Σ_j h(s_ij, m) (0 without a summed
 *                                denominator), row_count = the keys the mask kept;
 *                                the row offset β is left to the merge. A scan
 *                                (stick-breaking) writes o = Σ_j w_ij·v_j over its
 *                                keys, row_max = S, their log-survival Σ d(s_ij),
 *                                row_sum = 1, row_count as above (its row_max
 *                                unsplit: log r_i). An artifact whose manifest's
 *                                splits.forward is not key_chunks (kernelised,
 *                                implicit, a scan with a left-over) requires
 *                                kv_begin = 0 and partial = 0 (it has no
 *                                attn_merge_T)
 *       int64_t query_start,     the absolute position of q's row 0 and of k's
 *       int64_t key_start);      row 0: every region sees i = query_start + row
 *                                and j = key_start + key row, and `causal` keeps
 *                                j <= i in these positions (query_start = Nk - Nq,
 *                                key_start = 0: bottom-right alignment). kv_begin,
 *                                kv_len, q_begin, q_end stay rows. An artifact
 *                                whose splits.forward is whole (kernelised)
 *                                requires both 0
 *
 *   void _mlir_ciface_attn_merge_T(
 *       attn_memref2d *o_parts,  [S·Nq, dv] the S partial forwards' o, split s in
 *                                rows [s·Nq, (s+1)·Nq)
 *       attn_memref1d *max_parts, *sum_parts, *count_parts,  [S·Nq] likewise
 *       attn_memref2d *o, attn_memref1d *row_max, attn_memref1d *row_sum,
 *                                written for rows [q_begin, q_end) as the forward
 *                                writes them over all the splits' keys
 *       attn_memref1d *params, const attn_table *tables,
 *       int64_t batch, int64_t head, int64_t q_begin, int64_t q_end,
 *       int64_t query_start);    as the forward's (the row offset sees i)
 *     Folds the splits' states in split order with the online step's rescale, then
 *     finishes the rows like the forward (row offset, C, O/C). A scan's: each split
 *     nearer than those before it, S = S_s + S, O = O_s + e^(S_s)·O; row_max = S,
 *     row_sum = 1.
 *
 *   void _mlir_ciface_attn_backward_T(
 *       q, k, v, o, dout [Nq, dv], row_max, row_sum, params, tables, (inputs)
 *       attn_memref2d *dq,       [Nq, d]    rows [q_begin, q_end) overwritten
 *       attn_memref2d *dk,       [Nk, d]    rows [kv_begin, kv_len) overwritten
 *       attn_memref2d *dv,       [Nk, dv]   rows [kv_begin, kv_len) overwritten
 *       attn_memref1d *dparams,  [P]        overwritten with this call's share
 *       const attn_table *dtables, one per input: for a learnable input a contiguous
 *                                buffer of its shape and float type, to which the
 *                                slice's gradient is ADDED (the caller zeroes it and
 *                                may pass one buffer to several calls); the entries of
 *                                other inputs are not read
 *       int64_t batch, int64_t head,
 *       int64_t q_begin, int64_t q_end,  the query rows this call handles
 *       int64_t kv_begin, int64_t kv_len,  and the keys [kv_begin, kv_len): the call
 *                                writes dq for its rows and dk, dv for its keys,
 *                                each the share of the pairs (rows × keys) it
 *                                handles, and its share of dparams and dtables. The
 *                                row offset's share goes to the call with
 *                                kv_begin = 0. So the runtime can split one
 *                                (batch, head) over threads by query blocks (a
 *                                dk/dv buffer per block, summed) or, for few
 *                                queries, by key chunks (a dq buffer per chunk,
 *                                summed; each chunk's dk, dv rows its own), as
 *                                the manifest's splits.backward allows: whole
 *                                requires [0, Nq) and kv_begin = 0, rows
 *                                kv_begin = 0
 *       int64_t causal,
 *       int64_t query_start, int64_t key_start);  as the forward's
 *
 *   const int64_t attn_signature[];
 *     What the entry points (CPU and GPU) were compiled for, written by attn-compile
 *     from the attn ops themselves (not from the manifest); the runtime refuses an
 *     artifact whose manifest disagrees with it before any entry point runs:
 *       [0] ATTN_ABI_VERSION
 *       [1] T, the number of tensor inputs (attn.input)
 *       [2] the head dim the weights fix (0: any)
 *       [3] n, the number of learnable params (scalars, then weights, kernel order)
 *       then for each param its rank (0 for a scalar) followed by its extents;
 *       then for each tensor input, in argument order, its rank r, its element
 *       (ATTN_INPUT_FLOAT or the integer's bit width 8, 32, 64), 1 if learnable
 *       else 0, and its r extents (-1: any, named ones included).
 *     Its ELF symbol size is 8 * (4 + n + the sum of the param ranks + 3 T + the
 *     sum of the input ranks) bytes.
 *
 *   After linking, attn-compile appends a SHA-256 trailer (attn/checksum.h) that the
 *   runtime checks before it dlopen()s the file; it also requires attn_manifest and
 *   the entry points to be functions and attn_signature an object, read from the
 *   file's dynamic symbol table first.
 *
 * One forward or backward call handles one (batch, head) slice, or a range of its
 * query rows; the runtime parallelises across calls.
 * With grouped-query attention (k, v with H_kv heads, H a multiple) the call for
 * query head h gets k, v of head h / (H / H_kv) and its own dk, dv buffers, which
 * the runtime sums over the group; `head` is always the query head.
 * Memrefs are MLIR's strided descriptors: sizes and strides in elements, so any
 * strided view of a tensor can be passed without a copy. A row whose keys are all
 * masked gets O_i = 0, row_sum 0 and contributes no gradient.
 *
 * Tensor inputs (attn.input) come as attn_table descriptors: the address of
 * element (0, ..., 0) and, for the input's rank r, r extents (each >= 1) and r
 * strides in elements (0 broadcasts a dimension). A region reads element
 * (i_0, ..., i_{r-1}) with every index clamped to [0, extent): reads are always
 * in bounds. Regions index by absolute position, so a dimension named Nq spans
 * the positions up to the call's last query: its extent must be
 * max_b query_start + Nq (Nk: max_b key_start + Nk); with starts 0 that is Nq (Nk).
 * A learnable input's gradient element (i_0, ...) is at row-major
 * position Σ_d i_d·Π_{e>d} extent_e of its dtables buffer.
 *
 * ABI history: 2 added row_inputs / drow_inputs and weights in params; 3 added
 * batch and head (every region sees b, h, i, j); 4 replaced row_inputs /
 * drow_inputs by tables / dtables (tensor inputs of any rank and element type);
 * 5 added q_begin / q_end to the backward (one slice's queries split over threads)
 * and split-K to the forward (kv_begin, partial, row_count, attn_merge_T); 6 added
 * kv_begin to the backward (split-K for few queries); 8 added query_start and
 * key_start (absolute positions: KV-cache decoding, chunked training) to the
 * forward, backward and merge; 9 made the manifest JSON with one schema (the entry
 * points are unchanged; an artifact with the text manifest of 8 is refused with
 * that said: recompile it).
 * Within 9, QueryStarts and KEY_START became int64 (they were int32): the runtime
 * refuses an artifact whose kernels declare an integer pointer of another width. Then
 * the scalar KEY_START became KeyStarts (int64 [B], one key start per batch entry, as
 * QueryStarts): the runtime refuses an artifact whose kernels take KEY_START, saying
 * to recompile it. The CPU entry points are unchanged (key_start is per call).
 * Within 2, the runtime came to require attn_signature and the checksum trailer
 * (the manifest and the entry points are unchanged): recompile older artifacts.
 *
 * ---- CUDA -------------------------------------------------------------------
 * With `attn-compile --cuda-targets=sm_80,sm_90` the artifact also holds GPU kernels:
 * the emitted Triton module's (lib/Codegen/Triton), compiled ahead of time by
 * `python -m attn.triton_aot` for every entry of the kernel's gpu_schedule (chip ×
 * --cuda-dtypes × --cuda-head-dims; each with its tiles, warps and stages) and both
 * causal variants. The manifest's devices then list cuda, and its cuda section
 * names the targets (e.g. ["sm_80", "sm_90"]), the backend ("triton", the only one)
 * and one kernel per compiled (dtype, head dim); dtype: f32 | f16 | bf16 (storage;
 * accumulation f32).
 *
 * Images (exported constants, each with an int64 <name>_size in bytes):
 *   attn_triton_source   the Triton module (Python text, NUL-terminated): what a
 *                        Python caller with Triton compiles for a GPU none of the
 *                        cubins runs on
 *   attn_triton_launch   the launch description (JSON, NUL-terminated): inputs [name,
 *                        argument, element, extents, learnable], the ptxas version,
 *                        the decode rule (decode: max_rows, programs_per_sm; absent in
 *                        an artifact without attn_fwd_split and attn_fwd_merge), the
 *                        backward's plan (backward: rows_first, tile_states; see below;
 *                        absent: rows_first false, no tile states) and
 *                        per cubin its symbol, chip, dtype, head_dim, variant (full |
 *                        causal | any), kernel (attn_fwd | attn_fwd_split |
 *                        attn_fwd_merge | attn_bwd_preprocess | attn_bwd_dkdv |
 *                        attn_bwd_dq), function, parameters [name,
 *                        Triton type] in order, block_m and block_n (its tiles),
 *                        num_warps, num_stages, shared_bytes, the scratch sizes, the
 *                        grid rule and the score scale
 *   attn_triton_<chip>_<dtype>_d<hd>_<variant>_<kernel>   one cubin per kernel
 * Choice of chip: the device's exact sm_XY, else the highest target of the same major
 * with minor <= the device's, else an error naming the device and the targets.
 * Absolute positions go as QueryStarts and KeyStarts (int64 [B] on the device: entry
 * b's), as query_start and key_start of the CPU entry points.
 * The runtime passes the parameters by name in the described order (tensors with
 * their strides; i32, i64 and fp32 scalars in their width), then Triton's global and
 * profile scratch pointers, with num_warps · 32 threads and shared_bytes of dynamic
 * shared memory, over the grid of the rule with the cubin's tiles:
 *   attn_fwd, attn_bwd_preprocess, attn_bwd_dq   (cdiv(NQ, BLOCK_M), B * H)
 *   attn_bwd_dkdv                                (cdiv(NK, BLOCK_N), B * H_KV)
 * attn_bwd_preprocess runs first (delta_i = dout_i · o_i); dkdv and dq then read it.
 * Where backward.rows_first (a scan, an implicit normalizer) there is no
 * attn_bwd_preprocess: attn_bwd_dq runs first and writes delta itself (a scan's from its
 * rows' sums, an implicit normalizer's r_i), then attn_bwd_dkdv. Each parameter named in
 * backward.tile_states (a scan's TileLogSurvival and TileSuffix: its rows' S and B as
 * they enter each key tile) gets a float32 [B * H, cdiv(NK, BLOCK_N), NQ] buffer of
 * zeros, the same one for attn_bwd_dq (which writes it) and attn_bwd_dkdv (which reads
 * it). A runtime older than the "backward" field refuses such an artifact as it loads
 * it: it finds no attn_bwd_preprocess cubin.
 * Parameter and learnable-table gradients go to one slot per program, summed by the
 * caller in a fixed order. Statistics mean what they mean on the CPU (row_max = m_i, 0
 * for plain; row_sum = C_i·e^(-m_i)); fully masked rows get o = 0, row_sum = 0 and
 * contribute no gradient.
 *===----------------------------------------------------------------------===*/
#ifndef ATTN_ABI_H
#define ATTN_ABI_H

#include <stdint.h>

#define ATTN_ABI_VERSION 10
/* The highest rank of a tensor input (attn.input). */
#define ATTN_MAX_TABLE_RANK 4
/* attn_signature's element code of a float tensor input (q's dtype). */
#define ATTN_INPUT_FLOAT 0
#define ATTN_MANIFEST_SYMBOL "attn_manifest"
#define ATTN_SIGNATURE_SYMBOL "attn_signature"
/* The CPU entry points: a prefix, then the element type (f32, f64); the runtime calls
 * their C-interface wrappers, ATTN_CIFACE_PREFIX followed by the entry's name. */
#define ATTN_FORWARD_SYMBOL_PREFIX "attn_forward_"
#define ATTN_BACKWARD_SYMBOL_PREFIX "attn_backward_"
#define ATTN_MERGE_SYMBOL_PREFIX "attn_merge_"
#define ATTN_CIFACE_PREFIX "_mlir_ciface_"
/* The Triton kernels of the GPU code (attn_triton_launch's images name them). */
#define ATTN_TRITON_FORWARD "attn_fwd"
#define ATTN_TRITON_BACKWARD_PREPROCESS "attn_bwd_preprocess"
#define ATTN_TRITON_BACKWARD_KEYS "attn_bwd_dkdv"
#define ATTN_TRITON_BACKWARD_QUERIES "attn_bwd_dq"
/* The decode forward (few query rows, many keys): attn_fwd_split runs one chunk of keys
 * per program and writes the chunk's partial row state; attn_fwd_merge combines the
 * chunks and writes O, row_max and row_sum as attn_fwd does. */
#define ATTN_TRITON_FORWARD_SPLIT "attn_fwd_split"
#define ATTN_TRITON_FORWARD_MERGE "attn_fwd_merge"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} attn_memref2d;

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
} attn_memref1d;

/* One tensor input (see "Tensor inputs" above); entries past the input's rank are
 * not read. */
typedef struct {
  void *data;
  int64_t sizes[ATTN_MAX_TABLE_RANK];
  int64_t strides[ATTN_MAX_TABLE_RANK];
} attn_table;

/* Argument positions of the CPU entry points, in the order of attn_forward_fn and
 * attn_backward_fn below: the compiler builds the entry points from these, so a
 * new argument is added here once. */
enum attn_forward_arg {
  ATTN_FORWARD_Q, ATTN_FORWARD_K, ATTN_FORWARD_V, ATTN_FORWARD_O,
  ATTN_FORWARD_ROW_MAX, ATTN_FORWARD_ROW_SUM, ATTN_FORWARD_ROW_COUNT, ATTN_FORWARD_PARAMS,
  ATTN_FORWARD_TABLES, ATTN_FORWARD_BATCH, ATTN_FORWARD_HEAD, ATTN_FORWARD_Q_BEGIN,
  ATTN_FORWARD_Q_END, ATTN_FORWARD_KV_BEGIN, ATTN_FORWARD_KV_LEN, ATTN_FORWARD_CAUSAL,
  ATTN_FORWARD_PARTIAL, ATTN_FORWARD_QUERY_START, ATTN_FORWARD_KEY_START,
  ATTN_FORWARD_NUM_ARGS
};
enum attn_merge_arg {
  ATTN_MERGE_O_PARTS, ATTN_MERGE_MAX_PARTS, ATTN_MERGE_SUM_PARTS, ATTN_MERGE_COUNT_PARTS,
  ATTN_MERGE_O, ATTN_MERGE_ROW_MAX, ATTN_MERGE_ROW_SUM, ATTN_MERGE_PARAMS, ATTN_MERGE_TABLES,
  ATTN_MERGE_BATCH, ATTN_MERGE_HEAD, ATTN_MERGE_Q_BEGIN, ATTN_MERGE_Q_END,
  ATTN_MERGE_QUERY_START, ATTN_MERGE_NUM_ARGS
};
enum attn_backward_arg {
  ATTN_BACKWARD_Q, ATTN_BACKWARD_K, ATTN_BACKWARD_V, ATTN_BACKWARD_O, ATTN_BACKWARD_DOUT,
  ATTN_BACKWARD_ROW_MAX, ATTN_BACKWARD_ROW_SUM, ATTN_BACKWARD_PARAMS, ATTN_BACKWARD_TABLES,
  ATTN_BACKWARD_DQ, ATTN_BACKWARD_DK, ATTN_BACKWARD_DV, ATTN_BACKWARD_DPARAMS,
  ATTN_BACKWARD_DTABLES, ATTN_BACKWARD_BATCH, ATTN_BACKWARD_HEAD, ATTN_BACKWARD_Q_BEGIN,
  ATTN_BACKWARD_Q_END, ATTN_BACKWARD_KV_BEGIN, ATTN_BACKWARD_KV_LEN, ATTN_BACKWARD_CAUSAL,
  ATTN_BACKWARD_QUERY_START, ATTN_BACKWARD_KEY_START,
  ATTN_BACKWARD_NUM_ARGS
};

typedef const char *(*attn_manifest_fn)(void);

typedef void (*attn_forward_fn)(attn_memref2d *q, attn_memref2d *k, attn_memref2d *v,
                                attn_memref2d *o, attn_memref1d *row_max,
                                attn_memref1d *row_sum, attn_memref1d *row_count,
                                attn_memref1d *params, const attn_table *tables,
                                int64_t batch, int64_t head, int64_t q_begin, int64_t q_end,
                                int64_t kv_begin, int64_t kv_len, int64_t causal,
                                int64_t partial, int64_t query_start, int64_t key_start);

typedef void (*attn_merge_fn)(attn_memref2d *o_parts, attn_memref1d *max_parts,
                              attn_memref1d *sum_parts, attn_memref1d *count_parts,
                              attn_memref2d *o, attn_memref1d *row_max, attn_memref1d *row_sum,
                              attn_memref1d *params, const attn_table *tables, int64_t batch,
                              int64_t head, int64_t q_begin, int64_t q_end,
                              int64_t query_start);

typedef void (*attn_backward_fn)(attn_memref2d *q, attn_memref2d *k, attn_memref2d *v,
                                 attn_memref2d *o, attn_memref2d *dout,
                                 attn_memref1d *row_max, attn_memref1d *row_sum,
                                 attn_memref1d *params, const attn_table *tables,
                                 attn_memref2d *dq, attn_memref2d *dk, attn_memref2d *dv,
                                 attn_memref1d *dparams, const attn_table *dtables,
                                 int64_t batch, int64_t head, int64_t q_begin,
                                 int64_t q_end, int64_t kv_begin, int64_t kv_len,
                                 int64_t causal, int64_t query_start, int64_t key_start);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_ABI_H */
