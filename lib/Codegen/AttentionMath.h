//===- AttentionMath.h - the attention math, emitted in one place -*- C++ -*-===//
//
// Every schedule (CPU: generic loops, register-blocked tiles, the kernelised
// linear form; GPU: SIMT, tensor cores) builds its own loops, tiles, staging and
// reductions, and asks this emitter for the math of DESIGN.md §2 at the values
// it holds: one pair or row as scalars, `lanes` pairs of one row as vectors, or
// one element of an MMA fragment (a scalar). With the kernel's scalar functions
// f (attn-derive-backward; g, h evaluated at a shift m as e^-m·g, e^-m·h):
//
//   score        s = mod(raw, b, h, i, j; θ, T)            (raw without a mod)
//   online step  m' = max(m, stab(s)),  α = e^(m − m')     (plain: m' = 0, α = 1)
//                (what a row carries, how tiles and partial states fold and
//                 combine into it and how it ends are RowEquations.h's)
//                O' = α·O + g(s, m')·v,  l' = α·l + h(s, m')
//                (below f64, O and l carry their rounding error: accumulate)
//                m starts at the row offset's exponent x_β (β = e^x_β; log ε, log c)
//   finalise     C = l + β·e^−m | c | count,  O/C,  row_max = m,  row_sum = C
//                (β the row offset: ε, or the offset region at (b, h, i))
//                (a row without keys: O = 0, row_max = row_sum = 0)
//   backward     w = g(s, m)/C,  D = dO·O,
//                ds = (g'(s, m)·dP − h'(s, m)·D)/C          with dP = dO·v
//                dθ += (∂g/∂θ·dP − ∂h/∂θ·D)/C               (normalizer params)
//                dθ += ds·∂mod/∂θ,  d raw = ds·∂mod/∂raw
//                dθ += −∂β/∂θ·D/C per row (the offset region)
//                dT[read] += (∂g/∂r·dP − ∂h/∂r·D)/C | ds·∂mod/∂r   (each read r of a
//                learnable tensor input T, at the position it reads)
//   kernelised   g = a·s, h = b·s: ds = N·dP + H per row (N = a/C, H = −b·D/C),
//                dθ = da·∂a/∂θ + db·∂b/∂θ
//
// Pairs and rows come as structs (PairValues, BackwardRow) so that what a
// region may see grows in one place (tensor inputs at (b, h, i, j), a row offset
// β in C_i, GQA head indices, a bias or block-sparse mask) without touching the
// schedules' call sites.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_ATTENTIONMATH_H
#define ATTN_LIB_CODEGEN_ATTENTIONMATH_H

#include "lib/Codegen/RowEquations.h"
#include "lib/Transforms/ScalarFunctions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// How the emitter evaluates a scalar function: a func.call (CPU; the inliner
/// folds it into the loops) or its body cloned in place (GPU: a gpu.module
/// cannot call the host module's functions).
enum class CallStyle { Call, Inline };

/// What the math of one kernel needs. The values the emitter is given set its
/// shape: scalars of one float type, or vector<n x T> for n pairs of one row.
struct MathSetup {
  NormalizerOp normalizer;
  /// The kernel's algorithm is online (attn-classify-normalizer).
  bool online = false;
  /// The kernel's functions instantiated for the values' type and shape.
  const ScalarFunctions *functions = nullptr;
  CallStyle calls = CallStyle::Call;
  /// Flags of the float arithmetic the emitter adds (the kernelised form lets
  /// LLVM reassociate and contract its row sums).
  arith::FastMathFlags fastMath = arith::FastMathFlags::none;
};

/// Where a pair sits: its batch, head, query and key indices, which every region
/// but the feature map sees (index, or vector<index> lanes).
struct PairIndices {
  Value b, h, i, j;
};

/// One (query, key) pair, or `lanes` pairs of one query row, as the regions see
/// it; every value has the emitter's shape (indices as index or vector<index>).
struct PairValues {
  Value raw;      // the contracted score before the mod region
  PairIndices at; // batch, head, query and key index
  /// i1 where the schedule evaluates masked pairs too and selects (tiles,
  /// fragments): every result is 0 where it is false. Null: the pair takes part.
  Value keep;
};

/// Where a query row sits: its batch, head and query index, which a row offset
/// region sees (scalars: a row's statistics are scalars in every schedule).
struct RowIndices {
  Value b, h, i;
};

/// Which keys a query row sees before the mask region is asked: j < kvEnd, and
/// when causal (an i1 value) those at positions up to the row's: key row j sits at
/// position keyStart + j and query row i at queryStart + i, so causal keeps
/// j <= i + positionShift with positionShift = queryStart - keyStart (null: 0).
struct KeyBounds {
  Value kvEnd, isCausal, positionShift;
  /// The end of row i's keys.
  Value end(ImplicitLocOpBuilder &b, Value i) const;
  /// min(kvEnd, max(0, i + 1 + positionShift)): the end when causal.
  Value causalEnd(ImplicitLocOpBuilder &b, Value i) const;
  /// Whether the causal rule keeps (i, j): !causal || j <= i + positionShift.
  Value causalKeeps(ImplicitLocOpBuilder &b, Value i, Value j) const;
};

/// A query row's backward values (RowAlgorithm::prepareBackward).
using BackwardRow = BackwardRowOf<Value>;

/// A constant of `like`'s type: a float scalar, or a vector of them (broadcast).
Value constantLike(ImplicitLocOpBuilder &b, Value like, double value);

class AttentionMath {
public:
  /// `params` are the kernel's params (normalizer's, then score's) at the
  /// emitter's shape, `tables` its tensor inputs (memrefs, kernelInputs order).
  AttentionMath(ImplicitLocOpBuilder &b, const MathSetup &setup, ValueRange params,
                ValueRange tables = {});

  bool online() const { return setup.online; }
  NormalizerOp normalizer() const { return setup.normalizer; }
  unsigned numParams() const { return params.size(); }
  const ScalarFunctions &functions() const { return *setup.functions; }
  // --- regions ----------------------------------------------------------------
  /// s = mod(raw, b, h, i, j; θ, T), or raw without a mod region.
  Value score(const PairValues &pair);
  /// Whether the mask region keeps the pair at `at` (true without one; lanes of
  /// indices are asked only when there is a mask region).
  Value maskKeeps(const PairIndices &at);
  /// φ(x), or x without a feature map.
  Value feature(Value x);
  /// grad·φ'(x): a gradient by φ(x) chained to x (grad without a feature map).
  Value featureGrad(Value grad, Value x);
  /// g(s) and h(s) of the pair at `at`, evaluated at `shift` (the kernelised
  /// coefficients a = g(1, 0), b = h(1, 0)); h is null without a summed
  /// denominator.
  Value numerator(Value s, Value shift, const PairIndices &at);
  Value denominator(Value s, Value shift, const PairIndices &at);
  /// x(i, j) of a kernelised cosFormer mod s·cos(x(i, j)).
  Value phase(Value i, Value j);

  // --- forward ------------------------------------------------------------------
  /// stab(s), −∞ where the pair is masked (online only): the candidate for the
  /// running max; a schedule reduces candidates over its lanes or fragment.
  Value stabilizer(const PairValues &pair, Value s);
  /// The offset region's stabiliser at the row: the exponent of its β, where an
  /// online row's max starts (RowMaxStart).
  Value offsetStabilizer(const RowIndices &row);
  /// β·e^-m of the offset region at the row (m = 0 plain), null without one.
  Value offsetRegion(Value m, const RowIndices &row);
  /// g (numeratorTerm) and h (denominatorTerm; null without a summed
  /// denominator) of the pair at the row's shift (m' online, 0 plain), masked.
  Value numeratorTerm(const PairValues &pair, Value s, Value shift);
  Value denominatorTerm(const PairValues &pair, Value s, Value shift);
  /// α·x (x when alpha is null: plain accumulation).
  Value rescaled(Value x, Value alpha);
  /// Float arithmetic at the setup's fast-math flags.
  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  /// A sum a schedule carries across keys (l, and the accumulated output O) with,
  /// where `error` is not null, the rounding error of its additions (Kahan):
  /// without it an f32 sum stops growing once its terms fall below half an ulp
  /// of it (a row of 2^24 equal weights), with it the sum stays accurate to a few
  /// ulps for any key count.
  struct RunningSum {
    Value sum, error;
  };
  /// Whether running sums of `type` carry an error term: below f64 (an f64 sum
  /// over 2^24 keys is already accurate to ~1e-9), unless LLVM may reassociate.
  bool carriesSumErrors(Type type) const;
  /// α·acc + term (term null: nothing to add): the online step's l' = α·l + Σh and
  /// O' = α·O + Σ g·v; compensated where acc has an error term.
  RunningSum accumulate(RunningSum acc, Value alpha, Value term);

  // --- backward -----------------------------------------------------------------
  /// The row's share of dθ for kernel param `p` from its offset region: −∂β/∂θ·D/C
  /// (null for a param the offset does not take: score params, or no offset).
  Value offsetParamGrad(unsigned p, const BackwardRow &row, const RowIndices &at);
  /// The gradient of read `site` (an Offset-role entry of tableGrads) of the row's
  /// offset region: −∂β/∂r·D/C, and where it goes.
  struct TableGrad {
    Value position, value;
  };
  TableGrad offsetTableGrad(unsigned site, const BackwardRow &row, const RowIndices &at);
  /// (numeratorPart − denominatorPart·D)/C, either part null for 0: ds from
  /// g'·dP and h', dθ from ∂g/∂θ·dP and ∂h/∂θ, and the kernelised sums.
  Value gradientTerm(Value numeratorPart, Value denominatorPart, const BackwardRow &row);

  /// The gradients of one pair, each evaluated when first asked for and masked.
  class PairGradient {
  public:
    /// w = g/C.
    Value weight();
    /// ds = (g'·dP − h'·D)/C.
    Value scoreGrad();
    /// ds·∂mod/∂raw (ds without a mod region): what flows into q and k.
    Value rawGrad();
    /// The pair's share of dθ for kernel param `p`.
    Value paramGrad(unsigned p);
    /// The gradient of read `site` (a Numerator-, Denominator- or Score-role
    /// entry of ScalarFunctions::tableGrads) of a learnable tensor input: what to
    /// add, and where in the input (row-major position).
    TableGrad tableGrad(unsigned site);

  private:
    friend class AttentionMath;
    PairGradient(AttentionMath &math, const PairValues &pair, Value s, const BackwardRow &row,
                 Value dP);
    SmallVector<Value> normalizerArgs();
    SmallVector<Value> scoreArgs();
    AttentionMath &math;
    PairValues pair;
    Value s, dP, ds;
    BackwardRow row;
  };
  PairGradient gradient(const PairValues &pair, Value s, const BackwardRow &row, Value dP);

  // --- kernelised (g = a·s, h = b·s) -----------------------------------------------
  /// ds = dPFactor·dP + offset for every pair of the row: dPFactor = a/C,
  /// offset = −b·D/C (null without a summed denominator).
  struct LinearScoreGrad {
    Value dPFactor, offset;
  };
  LinearScoreGrad linearScoreGrad(Value a, Value b, const BackwardRow &row);
  Value linearScoreGradAt(const LinearScoreGrad &coefficients, Value dP);
  /// dθ_p from da = Σ dO·N/C and db = −Σ D·H/C: da·∂g(1)/∂θ + db·∂h(1)/∂θ
  /// (0 for score params, which do not reach a kernelised score); g and h of a
  /// kernelised kernel do not depend on the indices `at`.
  Value linearParamGrad(unsigned p, Value da, Value db, const PairIndices &at);

private:
  /// x where `keep` (when given) holds, else 0.
  Value masked(Value keep, Value x);
  Value call(func::FuncOp function, ValueRange arguments);
  /// `leading`, then the params, then the tensor inputs: the trailing
  /// arguments of every function but feature and phase.
  SmallVector<Value> withParams(ValueRange leading);
  /// The arguments of the offset functions: (m, b, h, i), then params and tables.
  SmallVector<Value> offsetArgs(Value m, const RowIndices &row);

  ImplicitLocOpBuilder &b;
  MathSetup setup;
  SmallVector<Value> params, tables;
};

} // namespace mlir::attn

#endif
