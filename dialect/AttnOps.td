//===- AttnOps.td - the attn dialect -------------------------*- tablegen -*-===//
//
// Declarative attention: a kernel binds a score function, an optional mask and a
// normalizer. Every region holds side-effect-free scalar arith/math ops only; the
// compiler derives forward algorithms and gradients from them.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_OPS
#define ATTN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::mlir::attn";
  let summary = "Declarative attention scores, masks and normalizers";
  let description = [{
    Per query i and key j: s_ij = mod(contract(q_i, k_j), i, j; θ), masked pairs
    contribute nothing, O_i = Σ_j g(s_ij; θ) v_j / C_i with C_i = ε + Σ_j h(s_ij; θ),
    a constant, or the count of unmasked keys. `g` and `h` are the numerator and
    denominator regions of an `attn.normalizer`.
  }];
  let useDefaultAttributePrinterParser = 1;
  // `attn.entry` on the generated entry points (Attn_EntryAttr).
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The discardable attribute naming a generated entry point (#attn.entry).
    static constexpr ::llvm::StringLiteral kEntryAttrName = "attn.entry";
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Attn_ContractKind : I32EnumAttr<"ContractKind", "how a query and a key give a raw score", [
    I32EnumAttrCase<"Dot", 0, "dot">,
    I32EnumAttrCase<"ScaledDot", 1, "scaled_dot">,
    I32EnumAttrCase<"Bilinear", 2, "bilinear">,
    I32EnumAttrCase<"Additive", 3, "additive">,
    I32EnumAttrCase<"Cosine", 4, "cosine">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_ContractKindAttr : EnumAttr<Attn_Dialect, Attn_ContractKind, "contract">;

def Attn_DenominatorKind : I32EnumAttr<"DenominatorKind", "how C_i is formed", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Constant", 1, "constant">,
    I32EnumAttrCase<"Count", 2, "count">,
    I32EnumAttrCase<"LogSurvival", 3, "log_survival">,
    // Implicit normalizers: w_ij = g(s_ij - τ_i) with τ_i the root of Σ_j w_ij = c.
    I32EnumAttrCase<"Threshold", 4, "threshold">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_DenominatorKindAttr : EnumAttr<Attn_Dialect, Attn_DenominatorKind, "denominator">;

def Attn_Algorithm : I32EnumAttr<"Algorithm", "forward algorithm chosen by attn-classify-normalizer", [
    I32EnumAttrCase<"Online", 0, "online">,
    I32EnumAttrCase<"Plain", 1, "plain">,
    I32EnumAttrCase<"Kernelised", 2, "kernelised">,
    I32EnumAttrCase<"Scan", 3, "scan">,
    I32EnumAttrCase<"Implicit", 4, "implicit">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_AlgorithmAttr : EnumAttr<Attn_Dialect, Attn_Algorithm, "algorithm">;

def Attn_BlockSparsity : I32EnumAttr<"BlockSparsity",
    "how the tiled schedules classify a (query tile, key tile) under the mask region "
    "(attn-analyze-block-sparsity)", [
    I32EnumAttrCase<"Indices", 0, "indices">,
    I32EnumAttrCase<"Tables", 1, "tables">,
    I32EnumAttrCase<"Dense", 2, "dense">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_BlockSparsityAttr : EnumAttr<Attn_Dialect, Attn_BlockSparsity, "block_sparsity">;

def Attn_CallDim : I32EnumAttr<"CallDim",
    "a dimension of the call that a tensor input's extent may name", [
    I32EnumAttrCase<"B", 0, "B">,
    I32EnumAttrCase<"H", 1, "H">,
    I32EnumAttrCase<"Hkv", 2, "Hkv">,
    I32EnumAttrCase<"Nq", 3, "Nq">,
    I32EnumAttrCase<"Nk", 4, "Nk">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}
def Attn_CallDimAttr : EnumAttr<Attn_Dialect, Attn_CallDim, "call_dim">;

def Attn_TableGradRole : I32EnumAttr<"TableGradRole",
    "the scalar function a read of a learnable tensor input sits in", [
    I32EnumAttrCase<"Numerator", 0, "numerator">,
    I32EnumAttrCase<"Denominator", 1, "denominator">,
    I32EnumAttrCase<"Score", 2, "score">,
    I32EnumAttrCase<"Offset", 3, "offset">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

def Attn_EntryRole : I32EnumAttr<"EntryRole", "what a generated entry point computes", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    I32EnumAttrCase<"Backward", 1, "backward">,
    I32EnumAttrCase<"Merge", 2, "merge">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

def Attn_CpuVariant : I32EnumAttr<"CpuVariant", "a CPU loop schedule", [
    I32EnumAttrCase<"Generic", 0, "generic">,
    I32EnumAttrCase<"Tiled", 1, "tiled">,
    I32EnumAttrCase<"Linear", 2, "linear">,
    I32EnumAttrCase<"Decode", 3, "decode">]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes the passes hand each other on an attn.kernel
//===----------------------------------------------------------------------===//

class Attn_Attr<string name, string attrMnemonic> : AttrDef<Attn_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Attn_TableGradAttr : Attn_Attr<"TableGrad", "table_grad"> {
  let summary = "one read of a learnable tensor input: where its gradient goes";
  let description = [{
    A read of learnable input number `input` (in the kernel's input order) in
    the `role` function. `derivative` returns the derivative of that function
    by the value read, `position` the row-major position of the element read
    (after clamping) in the input; both take the function's arguments.
  }];
  let parameters = (ins
    EnumParameter<Attn_TableGradRole>:$role,
    "int64_t":$input,
    "::mlir::FlatSymbolRefAttr":$derivative,
    "::mlir::FlatSymbolRefAttr":$position
  );
}

def Attn_KernelFunctionsAttr : Attn_Attr<"KernelFunctions", "functions"> {
  let summary = "the scalar functions of a kernel at one type, by role";
  let description = [{
    Written by attn-derive-backward (the kernel's own float type, `lanes` 0) and
    attn-instantiate-functions (another float type, or `lanes` n: the same
    functions on vector<n x _>), read by the lowerings: no pass finds another's
    functions by name. Roles: `numerator` g and `denominator` h (taking s, the
    shift m, the indices b, h, i, j), `stabilizer` (online: the max of the exp
    arguments), `offset` β (the row offset region, taking m, b, h, i) and
    `offset_stab` (online: its exponent), `score` (the mod region), `feature` φ,
    `mask`, `phase` (kernelised cosFormer), and the derivatives `*_ds` (by s),
    `feature_dx`, `numerator_dp` / `denominator_dp` / `offset_dp` (by each
    normalizer param), `score_dp` (by each score param) and `table_grads` (one
    #attn.table_grad per read of a learnable tensor input). Every function but `feature` and `phase` takes the
    kernel's params and then its tensor inputs (memrefs) as trailing arguments.
  }];
  let parameters = (ins
    "::mlir::Type":$type,
    DefaultValuedParameter<"int64_t", "0">:$lanes,
    "::mlir::FlatSymbolRefAttr":$numerator,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$denominator,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$stabilizer,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$offset,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$offset_stab,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$score,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$feature,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$mask,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$phase,
    "::mlir::FlatSymbolRefAttr":$numerator_ds,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$denominator_ds,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$score_ds,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$feature_dx,
    OptionalParameter<"::mlir::ArrayAttr">:$numerator_dp,
    OptionalParameter<"::mlir::ArrayAttr">:$denominator_dp,
    OptionalParameter<"::mlir::ArrayAttr">:$offset_dp,
    OptionalParameter<"::mlir::ArrayAttr">:$score_dp,
    OptionalParameter<"::mlir::ArrayAttr">:$table_grads
  );
}

def Attn_CpuScheduleAttr : Attn_Attr<"CpuSchedule", "cpu_schedule"> {
  let summary = "one CPU loop schedule of a kernel";
  let description = [{
    Chosen by attn-select-schedule (or written by hand to pin one), read by
    attn-lower-to-loops and attn-emit-manifest. Per element type `type` the
    kernel has one `generic` (scf loops, any head dim and stride) or `linear`
    (the kernelised linear-time form) schedule, and any number of `tiled` ones:
    a register-blocked variant for `head_dim` on vector<`lanes` x type>: the
    forward runs blocks of `rows` query rows against `forward_keys` keys, the
    backward blocks of `backward_rows` rows against `backward_keys` keys (both
    key counts multiples of `lanes`). A `decode` schedule beside the tiled one of
    its `head_dim` serves forward calls of at most `rows` query rows (a decoder
    step, a short prompt against a cache): the entry point chooses it by the
    call's q_end - q_begin. It reads K row by row (no packed panels: each key is
    read once per row), one row per tile of `forward_keys` keys; it takes no
    backward_keys or backward_rows (the backward keeps the tiled schedule).
  }];
  let parameters = (ins
    "::mlir::Type":$type,
    EnumParameter<Attn_CpuVariant>:$variant,
    DefaultValuedParameter<"int64_t", "0">:$head_dim,
    DefaultValuedParameter<"int64_t", "0">:$lanes,
    DefaultValuedParameter<"int64_t", "0">:$rows,
    DefaultValuedParameter<"int64_t", "0">:$forward_keys,
    DefaultValuedParameter<"int64_t", "0">:$backward_keys,
    DefaultValuedParameter<"int64_t", "0">:$backward_rows
  );
}

def Attn_EntryAttr : Attn_Attr<"Entry", "entry"> {
  let summary = "what a generated CPU entry point is: role, element type, kernel";
  let description = [{
    attn-lower-to-loops sets `attn.entry` on each public function it generates
    (the C interface of runtime/include/attn/abi.h): the `forward`, `backward`
    or `merge` entry of attn.kernel `kernel` on element type `type` (f32 or
    f64). attn-emit-manifest and every later step find the entry points by
    this attribute, never by their symbol names. Verified on a func.func whose
    first argument is a memref of `type`, in a module where `kernel` is an
    attn.kernel.
  }];
  let parameters = (ins
    EnumParameter<Attn_EntryRole>:$role,
    "::mlir::Type":$type,
    "::mlir::FlatSymbolRefAttr":$kernel
  );
}

def Attn_GpuScheduleAttr : Attn_Attr<"GpuSchedule", "gpu_schedule"> {
  let summary = "the Triton kernels' tiles, warps and pipeline depth on one chip";
  let description = [{
    Chosen by attn-select-gpu-schedule (or pinned), printed by the Triton emitter
    as the module's SCHEDULES and compiled by attn.triton_aot: on CUDA chip
    `chip` (sm_XY), for storage type `type` and `head_dim`, the forward runs
    tiles of `block_m` queries × `block_n` keys with `num_warps` warps and a
    `num_stages`-deep software pipeline; the three backward kernels use
    `backward_block_m` × `backward_block_n`, `backward_num_warps` and
    `backward_num_stages`. Tiles are powers of two from 16 to 256, warps 1 to 16
    (a power of two), stages 1 to 8.
  }];
  let parameters = (ins
    StringRefParameter<"CUDA chip, sm_XY">:$chip,
    "::mlir::Type":$type,
    "int64_t":$head_dim,
    "int64_t":$block_m,
    "int64_t":$block_n,
    "int64_t":$num_warps,
    "int64_t":$num_stages,
    "int64_t":$backward_block_m,
    "int64_t":$backward_block_n,
    "int64_t":$backward_num_warps,
    "int64_t":$backward_num_stages
  );
}

//===----------------------------------------------------------------------===//
// attn.normalizer
//===----------------------------------------------------------------------===//

def Attn_NormalizerOp : Attn_Op<"normalizer", [Symbol, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "g (numerator) and C (denominator) of an attention normalizer";
  let description = [{
    ```mlir
    attn.normalizer @tanhmax {
      numerator {
      ^bb0(%s: f32):
        %e = math.exp %s : f32
        %n = arith.negf %s : f32
        %f = math.exp %n : f32
        %g = arith.subf %e, %f : f32
        attn.yield %g : f32
      }
      denominator {
      ^bb0(%s: f32):
        ...
        attn.yield %h : f32
      }
    }
    ```
    The numerator region takes the score, the indices b, h, i, j and then one scalar
    per learnable param; the `sum` denominator region takes the same arguments.
    Instead of a region the denominator may be `constant <value>` or `count` (the
    number of unmasked keys). A summed denominator has a row offset β: `epsilon
    <value>` (a constant, C_i = ε + Σ_j h) or an `offset` region after it taking
    b, h, i and the params (C_i = β(b, h, i) + Σ_j h; softmax1, attention sinks).
    Params are declared `params(name = initial value, ...)`.

    `denominator log_survival { d }` declares a scan normalizer instead
    (stick-breaking, docs/normalizer-classes.md): no division; the region takes the
    numerator's arguments and yields the log-survival d(s) <= 0 of a pair, and each
    kept key's weight is discounted by the survivals of the kept keys after it,
    w_ij = g(s_ij)·exp(Σ_{k kept, k > j} d(s_ik)). `left_over current` after the
    region adds what no key took, r_i = exp(Σ_{k kept} d(s_ik)), times the value at
    the query's own position (v_i), as the paper's model does.

    An implicit normalizer (sparsemax, α-entmax) writes `denominator threshold
    <c>`: the weights are w_ij = g(s_ij − τ_i, b, h, i, j) with τ_i the root of
    Σ_j g(s_ij − τ_i) = c (c > 0), which the forward finds per row; g must be 0
    for arguments <= 0 and non-decreasing (docs/normalizer-classes.md).

    Two short forms, which attn-expand-shared-regions writes out before any other
    pass reads the regions: `denominator sum` (`sum_of_numerator`, no region) sums
    the numerator itself, h = g; a `shared` region before the numerator takes the
    numerator's arguments and yields values that the numerator and the denominator
    receive as extra trailing arguments, so work both need is written once.
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Attn_DenominatorKindAttr:$denominator_kind,
    OptionalAttr<F64Attr>:$denominator_constant,
    OptionalAttr<F64Attr>:$epsilon,
    StrArrayAttr:$param_names,
    DenseF64ArrayAttr:$param_inits,
    OptionalAttr<Attn_AlgorithmAttr>:$algorithm,
    UnitAttr:$sum_of_numerator,
    // The stable-form rules attn-classify-normalizer applied to the regions
    // (lib/Transforms/StableForms.h), which --attn-explain reports.
    OptionalAttr<StrArrayAttr>:$rewrites,
    // The user guarantees C_i != 0: the check that a summed denominator cannot
    // vanish (attn-classify-normalizer) is skipped.
    UnitAttr:$assume_nonzero_denominator,
    // `left_over current` of a log_survival denominator: O_i += r_i·v_i.
    UnitAttr:$left_over_to_current
  );
  let regions = (region SizedRegion<1>:$numerator, MaxSizedRegion<1>:$denominator,
                 MaxSizedRegion<1>:$offset, MaxSizedRegion<1>:$shared);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The float type every region of this normalizer computes in.
    ::mlir::Type getScalarType();
    unsigned getNumParams() { return getParamNames().size(); }
    /// A summed denominator's region, or a scan's log-survival region.
    bool hasDenominatorRegion() {
      return getDenominatorKind() == DenominatorKind::Sum ||
             getDenominatorKind() == DenominatorKind::LogSurvival;
    }
    bool hasOffsetRegion() { return !getOffset().empty(); }
    /// Whether the normalizer is written with a short form (`denominator sum`, a
    /// `shared` region) that attn-expand-shared-regions has not expanded yet.
    bool hasShortForms() { return getSumOfNumerator() || !getShared().empty(); }
    /// The error of a pass that reads the regions and finds a short form.
    ::mlir::LogicalResult requireExpanded();
    /// The checks of the offset region (verify()).
    ::mlir::LogicalResult verifyOffset();
  }];
}

//===----------------------------------------------------------------------===//
// attn.score
//===----------------------------------------------------------------------===//

def Attn_ScoreOp : Attn_Op<"score", [Symbol, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "score function: optional feature map, a contraction of q and k, optional mod";
  let description = [{
    ```mlir
    attn.score @alibi contract scaled_dot params(slope = 0.5) mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32):
      ...
      attn.yield %t : f32
    }
    ```
    `scaled_dot` multiplies q·k by `scale`, which defaults to 1/sqrt(d); `cosine`
    (q·k/(|q|_ε |k|_ε), |x|_ε = sqrt(x·x + ε²), ε = 1e-6) and `bilinear` (q·W·k)
    take an optional `scale` too (default 1). `additive` is
    v·tanh(W_q q + W_k k) with `hidden <n>` = n, the width of v.

    Learnable tensors are declared as `weights(name: <shape> = identity | <fill>)`,
    e.g. `weights(W: 64x64 = identity)`; `identity` is the (rectangular) unit
    matrix. `bilinear` takes one [d x d] weight W; `additive` takes three,
    W_q [n x d], W_k [n x d] and v [n], in that order. The shapes fix the head
    dim d. Weights are not region arguments: the contraction uses them. `dot`
    and `scaled_dot` with a feature region may take one weight W [m x d]: a
    learnable projection before the feature map, s = φ(W q)·φ(W k) (nested
    attention's tanh(W x)); scaled_dot's default scale is then 1/sqrt(m).

    The optional `feature` region is a scalar map φ applied to every entry of q
    and k before the contraction (linear attention: s = φ(q)·φ(k)). The mod
    region takes the contracted score, the batch, head, query and key indices,
    then one scalar per param; it may read tensor inputs (attn.read).
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Attn_ContractKindAttr:$contract,
    OptionalAttr<F64Attr>:$scale,
    OptionalAttr<I64Attr>:$hidden,
    StrArrayAttr:$param_names,
    DenseF64ArrayAttr:$param_inits,
    // weights(...): names, shapes (DenseI64ArrayAttr each) and initialisers
    // (a FloatAttr fill value or the string "identity" each).
    OptionalAttr<StrArrayAttr>:$weight_names,
    OptionalAttr<ArrayAttr>:$weight_shapes,
    OptionalAttr<ArrayAttr>:$weight_inits
  );
  let regions = (region MaxSizedRegion<1>:$feature, MaxSizedRegion<1>:$mod);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumParams() { return getParamNames().size(); }
    unsigned getNumWeights() { return getWeightNames() ? getWeightNames()->size() : 0; }
    /// The shape of weight `index` and its number of elements.
    ::llvm::ArrayRef<int64_t> getWeightShape(unsigned index);
    int64_t getWeightSize(unsigned index);
    /// The head dim fixed by the weights' shapes, or 0 when any d is accepted.
    int64_t getRequiredHeadDim();
    bool hasMod() { return !getMod().empty(); }
    bool hasFeatureMap() { return !getFeature().empty(); }
    /// The float type of the mod or feature region, or null without either.
    ::mlir::Type getScalarType();
  }];
}

//===----------------------------------------------------------------------===//
// attn.mask
//===----------------------------------------------------------------------===//

def Attn_MaskOp : Attn_Op<"mask", [Symbol, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "which (query, key) pairs take part";
  let description = [{
    ```mlir
    attn.mask @causal {
    ^bb0(%i: index, %j: index):
      %keep = arith.cmpi ule, %j, %i : index
      attn.yield %keep : i1
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.kernel
//===----------------------------------------------------------------------===//

def Attn_KernelOp : Attn_Op<"kernel", [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "an attention kernel: score + normalizer + optional mask";
  let description = [{
    ```mlir
    attn.kernel @tanhmax_causal normalizer(@tanhmax) score(@scaled) mask(@causal)
    ```
    Without `score(...)` the score is q·k/sqrt(d). The kernel's learnable params are
    the normalizer's followed by the score's; their names must not clash.
    The compiler's passes annotate a kernel, each reading what the earlier ones
    wrote (users do not write these): `algorithm` (attn-classify-normalizer:
    `kernelised` when the kernel runs in the linear-time form, s = φ(q)·φ(k), g
    and C linear in s, else the normalizer's algorithm), `functions`
    (attn-derive-backward, attn-instantiate-functions: #attn.functions),
    `cpu_schedule` (attn-select-schedule: #attn.cpu_schedule),
    `gpu_schedule` (attn-select-gpu-schedule: #attn.gpu_schedule) and
    `block_sparsity` (attn-analyze-block-sparsity, on a masked kernel:
    `indices` when the mask region is bounded over a tile from its index ranges
    alone, `tables` when it also needs the per-call value ranges of the tensor
    inputs it reads, `dense` when the tiles evaluate it pair by pair).
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$normalizer,
    OptionalAttr<FlatSymbolRefAttr>:$score,
    OptionalAttr<FlatSymbolRefAttr>:$mask,
    OptionalAttr<Attn_AlgorithmAttr>:$algorithm,
    OptionalAttr<TypedArrayAttrBase<Attn_KernelFunctionsAttr, "scalar function sets">>:$functions,
    OptionalAttr<TypedArrayAttrBase<Attn_CpuScheduleAttr, "CPU schedules">>:$cpu_schedule,
    OptionalAttr<TypedArrayAttrBase<Attn_GpuScheduleAttr, "GPU schedules">>:$gpu_schedule,
    OptionalAttr<Attn_BlockSparsityAttr>:$block_sparsity
  );
  let assemblyFormat = [{
    $sym_name `normalizer` `(` $normalizer `)` (`score` `(` $score^ `)`)?
    (`mask` `(` $mask^ `)`)? attr-dict
  }];
  let extraClassDeclaration = [{
    NormalizerOp getNormalizerOp();
    ScoreOp getScoreOp();  // null when the default scaled dot is used
    MaskOp getMaskOp();    // null when unmasked
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.input, attn.read: tensor inputs passed at the call
//===----------------------------------------------------------------------===//

def Attn_InputExtent : AnyAttrOf<[Attn_CallDimAttr, I64Attr, UnitAttr]>;

def Attn_InputOp : Attn_Op<"input", [Symbol]> {
  let summary = "a tensor passed at the call that regions read (a table)";
  let description = [{
    ```mlir
    attn.input @slopes : tensor<?xf32> dims(H)                  // ALiBi slopes [H]
    attn.input @rel_bias learnable : tensor<?x32xf32> dims(H, 32) // T5 buckets, learned
    attn.input @doc : tensor<?x?xi64> dims(B, Nk)                // document ids [B, Nk]
    attn.input @scale learnable = 0.43 : tensor<?xf32> dims(H)   // SSMax, starts at 0.43
    ```
    A tensor of rank 1 to 4 given at every call, read by the regions of the
    kernels that use it with `attn.read`. `?` extents are the caller's; a static
    extent is checked by the runtime. `dims(...)`, one entry per dimension, may
    name the call's dimension an extent must equal (B, H, Hkv, Nq, Nk; the type
    has `?` there), which the runtime checks at every call; `?` and numbers
    repeat the type's extent. Float inputs compute in the kernel's float type
    (at the call: the dtype of q); integer inputs are i8, i32 or i64.
    `learnable` (floats only): the input gets a gradient, summed over every read;
    `= FLOAT` after it is the initial value of every element where a module
    creates the input as a parameter (default 0).
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    UnitAttr:$learnable,
    OptionalAttr<F64Attr>:$init,
    TypeAttrOf<AnyRankedTensor>:$type,
    // One entry per dimension: a #attn.call_dim (the call's dimension), an i64 (that
    // fixed extent) or unit ('?', the caller's).
    OptionalAttr<TypedArrayAttrBase<Attn_InputExtent,
        "extents: #attn.call_dim, i64 or unit">>:$dims
  );
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    int64_t getRank() { return getTensorType().getRank(); }
    ::mlir::Type getElementType() { return getTensorType().getElementType(); }
    /// The call dimension extent `d` must equal, if `dims` names one.
    std::optional<CallDim> getCallDim(int64_t d);
  }];
}

def Attn_ReadOp : Attn_Op<"read", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one element of a tensor input, inside a region";
  let description = [{
    ```mlir
    %slope = attn.read @slopes[%h] : f32
    %same = attn.read @doc[%b, %i] : i64
    ```
    The element of the input at the given indices (one `index` per dimension).
    An index outside [0, extent) is clamped to the nearest element: reads are
    always defined, and a gradient goes to the element that was read.
  }];
  let arguments = (ins FlatSymbolRefAttr:$input, Variadic<Index>:$indices);
  let results = (outs AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$result);
  let assemblyFormat = "$input `[` $indices `]` attr-dict `:` type($result)";
}

def Attn_TableLoadOp : Attn_Op<"table_load", [Pure]> {
  let summary = "an element of a tensor input in an outlined function (internal)";
  let description = [{
    What attn.read becomes in the kernel's scalar functions: the element of
    `table` at `indices`, each clamped to [0, extent). Scalar indices give a
    scalar; vector<n x index> indices (a function instantiated on lanes) give
    vector<n x element>, one element per lane. attn-lower-to-loops expands it.
  }];
  let arguments = (ins AnyStridedMemRef:$table, Variadic<AnyType>:$indices);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$table `[` $indices `]` attr-dict `:` type($table) `,` type($indices) `->` type($result)";
  let hasVerifier = 1;
}

def Attn_TablePositionOp : Attn_Op<"table_position", [Pure]> {
  let summary = "the row-major position of a tensor input's element (internal)";
  let description = [{
    The position Σ_d clamp(i_d)·Π_{e>d} extent_e of the element attn.table_load
    reads at `indices`: where the gradient of a learnable input's read goes in
    its contiguous gradient. Scalar or vector<n x index> indices, like
    attn.table_load.
  }];
  let arguments = (ins AnyStridedMemRef:$table, Variadic<AnyType>:$indices);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$table `[` $indices `]` attr-dict `:` type($table) `,` type($indices) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.yield
//===----------------------------------------------------------------------===//

def Attn_YieldOp : Attn_Op<"yield", [Pure, Terminator,
    ParentOneOf<["NormalizerOp", "ScoreOp", "MaskOp"]>]> {
  let summary = "yields the scalar value of a region (a shared region: its values)";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let extraClassDeclaration = [{
    /// The one value of a region other than `shared` (the region verifiers check it).
    ::mlir::Value getValue() { return getValues().front(); }
  }];
}

#endif // ATTN_OPS
